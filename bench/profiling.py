"""Profile the broker from outside with py-spy and draw a flame graph.

py-spy samples a running Python process's stacks (``py-spy record --pid``) without
touching its code. It records in py-spy's ``raw`` format (collapsed stacks, one line
per distinct stack with its sample count); this module turns that into an SVG flame
graph and into tables of the functions with the most samples, by self time (the
function was on top of the stack) and inclusive time (anywhere on the stack). Idle
threads are left out (only samples holding the GIL count), so shares are shares of the
time the broker spent running Python.
"""

from __future__ import annotations

import html
import os
import shutil
import signal
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path


def py_spy_binary() -> str:
    candidate = Path(sys.executable).parent / "py-spy"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("py-spy")
    if found is None:
        raise FileNotFoundError(
            "py-spy is not installed: pip install -e '.[bench]' ('make bench' does this)"
        )
    return found


class Recorder:
    """``with Recorder(pid, raw_path):`` samples ``pid`` while the block runs."""

    def __init__(self, pid: int, raw_path: Path, rate: int = 250) -> None:
        self.pid = pid
        self.raw_path = raw_path
        self.rate = rate
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Recorder:
        self.process = subprocess.Popen(
            [
                py_spy_binary(),
                "record",
                "--pid",
                str(self.pid),
                "--rate",
                str(self.rate),
                "--function",  # one frame per function, not per line
                # Only samples holding the GIL: Python actually running. py-spy's idle
                # detection misses threads parked in Condition.wait and the event loop
                # in epoll, which otherwise fill half the profile.
                "--gil",
                "--format",
                "raw",
                "--output",
                str(self.raw_path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            _out, err = self.process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _out, err = self.process.communicate()
        if not self.raw_path.exists():
            raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')}")


def read_stacks(raw_path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in raw_path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def short_frame(frame: str) -> str:
    """``handle (/…/broker/gregor_broker/server/x.py:12)`` → ``gregor_broker/server/x.py:handle``;
    other code keeps its path below site-packages or the standard library."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    if "gregor_broker/" in path:
        path = "gregor_broker/" + path.split("gregor_broker/", 1)[1]
    else:
        for marker in ("site-packages/", "lib/python3.11/", "lib/python3/"):
            if marker in path:
                path = path.split(marker, 1)[1]
                break
    return f"{path}:{name}" if path else name


def hot_spots(
    stacks: Counter[tuple[str, ...]], top: int = 15, top_inclusive: int = 60
) -> dict[str, object]:
    total = sum(stacks.values())
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for stack, count in stacks.items():
        frames = [short_frame(frame) for frame in stack]
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count

    def table(counter: Counter[str], limit: int = top) -> list[dict[str, object]]:
        return [
            {"function": name, "samples": count, "share": count / total if total else 0.0}
            for name, count in counter.most_common(limit)
        ]

    return {"samples": total, "self": table(own), "inclusive": table(inclusive, top_inclusive)}


def flame_graph_svg(stacks: Counter[tuple[str, ...]], title: str, width: int = 1200) -> str:
    """A plain SVG flame graph (root at the bottom); hover a box for its samples."""
    tree: dict = {"count": 0, "children": {}}
    for stack, count in stacks.items():
        node = tree
        node["count"] += count
        for frame in stack:
            node = node["children"].setdefault(frame, {"count": 0, "children": {}})
            node["count"] += count
    total = tree["count"] or 1

    def depth(node: dict) -> int:
        return 1 + max((depth(child) for child in node["children"].values()), default=0)

    row = 16
    levels = depth(tree)
    height = levels * row + 40
    boxes: list[str] = []

    def draw(node: dict, name: str, x: float, level: int) -> None:
        box_width = node["count"] / total * width
        if box_width < 0.3:
            return
        y = height - 10 - (level + 1) * row
        share = 100 * node["count"] / total
        label = short_frame(name) if level else name
        hue = 10 + zlib.crc32(name.encode()) % 40
        text = ""
        characters = int(box_width / 7)
        if characters >= 3:
            shown = label if len(label) <= characters else label[: characters - 2] + ".."
            text = f'<text x="{x + 2:.1f}" y="{y + 12}">{html.escape(shown)}</text>'
        boxes.append(
            f"<g><title>{html.escape(label)} ({node['count']} samples, {share:.2f}%)</title>"
            f'<rect x="{x:.1f}" y="{y}" width="{box_width:.1f}" height="{row - 1}" '
            f'fill="hsl({hue},80%,60%)"/>{text}</g>'
        )
        child_x = x
        for child_name, child in sorted(node["children"].items()):
            draw(child, child_name, child_x, level + 1)
            child_x += child["count"] / total * width

    draw(tree, f"all ({total} samples)", 0.0, 0)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="11">'
        f'<text x="4" y="16" font-size="14">{html.escape(title)}</text>'
        + "".join(boxes)
        + "</svg>\n"
    )
