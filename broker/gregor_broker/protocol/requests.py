"""kio's request classes for the versions Gregor serves, one alias per API.

A handler's ``request`` is typed with these (``handle_produce(..., request: ProduceRequest)``)
instead of ``Any``: the union of kio's generated dataclasses for exactly the versions in
``server/handlers/__init__.py``'s ``API_TABLE`` (a unit test keeps the two in step).
Fields a version lacks are read with ``getattr`` in the handlers.
"""

from __future__ import annotations

from typing import TypeAlias

from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
from kio.schema.fetch.v5.request import FetchRequest as FetchRequestV5
from kio.schema.fetch.v6.request import FetchRequest as FetchRequestV6
from kio.schema.fetch.v7.request import FetchRequest as FetchRequestV7
from kio.schema.fetch.v8.request import FetchRequest as FetchRequestV8
from kio.schema.fetch.v9.request import FetchRequest as FetchRequestV9
from kio.schema.fetch.v10.request import FetchRequest as FetchRequestV10
from kio.schema.fetch.v11.request import FetchRequest as FetchRequestV11
from kio.schema.fetch.v12.request import FetchRequest as FetchRequestV12
from kio.schema.fetch.v13.request import FetchRequest as FetchRequestV13
from kio.schema.fetch.v14.request import FetchRequest as FetchRequestV14
from kio.schema.fetch.v15.request import FetchRequest as FetchRequestV15
from kio.schema.fetch.v16.request import FetchRequest as FetchRequestV16
from kio.schema.metadata.v0.request import MetadataRequest as MetadataRequestV0
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v2.request import MetadataRequest as MetadataRequestV2
from kio.schema.metadata.v3.request import MetadataRequest as MetadataRequestV3
from kio.schema.metadata.v4.request import MetadataRequest as MetadataRequestV4
from kio.schema.metadata.v5.request import MetadataRequest as MetadataRequestV5
from kio.schema.metadata.v6.request import MetadataRequest as MetadataRequestV6
from kio.schema.metadata.v7.request import MetadataRequest as MetadataRequestV7
from kio.schema.metadata.v8.request import MetadataRequest as MetadataRequestV8
from kio.schema.metadata.v9.request import MetadataRequest as MetadataRequestV9
from kio.schema.metadata.v10.request import MetadataRequest as MetadataRequestV10
from kio.schema.metadata.v11.request import MetadataRequest as MetadataRequestV11
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.metadata.v13.request import MetadataRequest as MetadataRequestV13
from kio.schema.produce.v3.request import ProduceRequest as ProduceRequestV3
from kio.schema.produce.v4.request import ProduceRequest as ProduceRequestV4
from kio.schema.produce.v5.request import ProduceRequest as ProduceRequestV5
from kio.schema.produce.v6.request import ProduceRequest as ProduceRequestV6
from kio.schema.produce.v7.request import ProduceRequest as ProduceRequestV7
from kio.schema.produce.v8.request import ProduceRequest as ProduceRequestV8
from kio.schema.produce.v9.request import ProduceRequest as ProduceRequestV9
from kio.schema.produce.v10.request import ProduceRequest as ProduceRequestV10
from kio.schema.produce.v11.request import ProduceRequest as ProduceRequestV11

ProduceRequest: TypeAlias = (
    ProduceRequestV3
    | ProduceRequestV4
    | ProduceRequestV5
    | ProduceRequestV6
    | ProduceRequestV7
    | ProduceRequestV8
    | ProduceRequestV9
    | ProduceRequestV10
    | ProduceRequestV11
)
PRODUCE_REQUEST_VERSIONS: dict[int, type] = {
    3: ProduceRequestV3,
    4: ProduceRequestV4,
    5: ProduceRequestV5,
    6: ProduceRequestV6,
    7: ProduceRequestV7,
    8: ProduceRequestV8,
    9: ProduceRequestV9,
    10: ProduceRequestV10,
    11: ProduceRequestV11,
}

FetchRequest: TypeAlias = (
    FetchRequestV4
    | FetchRequestV5
    | FetchRequestV6
    | FetchRequestV7
    | FetchRequestV8
    | FetchRequestV9
    | FetchRequestV10
    | FetchRequestV11
    | FetchRequestV12
    | FetchRequestV13
    | FetchRequestV14
    | FetchRequestV15
    | FetchRequestV16
)
FETCH_REQUEST_VERSIONS: dict[int, type] = {
    4: FetchRequestV4,
    5: FetchRequestV5,
    6: FetchRequestV6,
    7: FetchRequestV7,
    8: FetchRequestV8,
    9: FetchRequestV9,
    10: FetchRequestV10,
    11: FetchRequestV11,
    12: FetchRequestV12,
    13: FetchRequestV13,
    14: FetchRequestV14,
    15: FetchRequestV15,
    16: FetchRequestV16,
}

MetadataRequest: TypeAlias = (
    MetadataRequestV0
    | MetadataRequestV1
    | MetadataRequestV2
    | MetadataRequestV3
    | MetadataRequestV4
    | MetadataRequestV5
    | MetadataRequestV6
    | MetadataRequestV7
    | MetadataRequestV8
    | MetadataRequestV9
    | MetadataRequestV10
    | MetadataRequestV11
    | MetadataRequestV12
    | MetadataRequestV13
)
METADATA_REQUEST_VERSIONS: dict[int, type] = {
    0: MetadataRequestV0,
    1: MetadataRequestV1,
    2: MetadataRequestV2,
    3: MetadataRequestV3,
    4: MetadataRequestV4,
    5: MetadataRequestV5,
    6: MetadataRequestV6,
    7: MetadataRequestV7,
    8: MetadataRequestV8,
    9: MetadataRequestV9,
    10: MetadataRequestV10,
    11: MetadataRequestV11,
    12: MetadataRequestV12,
    13: MetadataRequestV13,
}
