// kafkajs against Gregor: one scenario per run, results as one JSON line on stdout.
// Usage: node client.mjs <scenario> <bootstrap> <topic>
//   roundtrip  create a 3-partition topic, produce keyed messages with headers (none and
//              gzip), consume them all in a consumer group, commit, read committed offsets
//   metadata   fetch topic metadata and the cluster description
import { Kafka, CompressionTypes, logLevel } from "kafkajs";

const [scenario, bootstrap, topic] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: "gregor-compat-kafkajs",
  brokers: [bootstrap],
  logLevel: logLevel.ERROR,
  retry: { retries: 10, initialRetryTime: 100 },
});

async function roundtrip() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
  const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const sent = [];
  for (const [codec, compression] of [["none", CompressionTypes.None], ["gzip", CompressionTypes.GZIP]]) {
    const messages = [];
    for (let i = 0; i < 30; i++) {
      const key = `${codec}-key-${i}`;
      messages.push({ key, value: `${codec}-value-${i}`, partition: i % 3, headers: { codec, index: String(i) } });
    }
    const reply = await producer.send({ topic, acks: -1, compression, messages });
    sent.push(...reply.map((r) => ({ partition: r.partition, baseOffset: r.baseOffset, errorCode: r.errorCode })));
  }
  await producer.disconnect();

  const groupId = `${topic}-group`;
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const received = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out with ${received.length} of 60`)), 60000);
    consumer.run({
      autoCommit: true,
      autoCommitThreshold: 1,
      eachMessage: async ({ partition, message }) => {
        received.push({
          partition,
          offset: Number(message.offset),
          key: message.key.toString(),
          value: message.value.toString(),
          headers: Object.fromEntries(Object.entries(message.headers).map(([k, v]) => [k, v.toString()])),
        });
        if (received.length === 60) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.commitOffsets([]).catch(() => {});
  await consumer.disconnect();
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
  const offsets = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  return { sent, received, committed, offsets };
}

async function metadata() {
  const admin = kafka.admin();
  await admin.connect();
  const cluster = await admin.describeCluster();
  const topics = await admin.fetchTopicMetadata({ topics: [topic] }).catch((e) => ({ error: e.type || e.message }));
  await admin.disconnect();
  return { cluster, topics };
}

const scenarios = { roundtrip, metadata };
try {
  const result = await scenarios[scenario]();
  process.stdout.write(JSON.stringify(result) + "\n");
  process.exit(0);
} catch (error) {
  process.stdout.write(JSON.stringify({ error: String(error && (error.type || error.message) || error) }) + "\n");
  process.exit(1);
}
