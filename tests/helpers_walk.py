"""Following one command's input through the package: where it stops, which rooms, climbs back up.

A command runs in-process under a trace function. The *input* is the command line's parsed
options (the ``argparse.Namespace``), the task or model name given on the command line, and
what the command hands to the library (its settings object, with the settings, specs and files
it holds). A *stop* is a function of the package the input is handed to: an argument other
than ``self`` is part of the input (a settings object's own methods are the input reading
itself, not a place it travels to). Each stop's room is its top-level package
(``tests/test_architecture.py``'s layers); it is a *climb back up* when the stop that handed it
the input, directly or through other functions, sits in a lower room (a callback into a room
above), or when the command hands the input down again after its library call (the call that
takes the settings object) returned. *Lookups* count calls of ``tasks.spec.get_task``: the
task table read again. Scalars taken out of the settings (a path, a batch size) are not
followed: the walk follows the objects that carry the user's choices.

Run as a script to print a walk: ``python tests/helpers_walk.py train-task trec --train FILE``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

SRC = Path(__file__).resolve().parents[1] / "src" / "contextvec"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_architecture import LAYERS  # noqa: E402  (the one table of rooms and layers)

SCALARS = (str, bytes, int, float, bool, Path)


@dataclass(frozen=True)
class Stop:
    name: str           # room:qualified name
    room: str
    handed_by: str | None  # the stop that handed it the input (None: the command's entry)
    climb: bool


@dataclass
class Walk:
    stops: list[Stop] = field(default_factory=list)
    lookups: int = 0
    exit_code: int | None = None

    @property
    def rooms(self) -> list[str]:
        return list(dict.fromkeys(stop.room for stop in self.stops))

    @property
    def climbs(self) -> list[Stop]:
        return [stop for stop in self.stops if stop.climb]

    def lines(self) -> list[str]:
        head = (f"{len(self.stops)} stops in {len(self.rooms)} rooms ({', '.join(self.rooms)}), "
                f"{len(self.climbs)} climbs back up, {self.lookups} task lookups")
        return [head] + [f"  {LAYERS[s.room]} {s.name}  <- {s.handed_by or '(entry)'}"
                         + ("  CLIMB" if s.climb else "") for s in self.stops]


@functools.cache
def _room(filename: str) -> str | None:
    try:
        relative = Path(filename).resolve().relative_to(SRC)
    except ValueError:
        return None
    return relative.parts[0].removesuffix(".py") if relative.parts[0] != "__init__.py" else None


class _Tracer:
    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.inputs: dict[int, object] = {}
        self.walk = Walk()
        self.frames: dict[int, tuple[str, str]] = {}  # live frames that are stops: (name, room)
        self.seen: set[str] = set()
        self.entry: str | None = None  # the command's run function, and its frame
        self.entry_frame = 0
        self.front_door = 0  # the frame of the library call that takes the command's settings
        self.front_door_done = False  # ... and that call returned

    def add(self, obj: object) -> None:
        if obj is None or isinstance(obj, SCALARS) or id(obj) in self.inputs:
            return
        self.inputs[id(obj)] = obj
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                self.add(getattr(obj, f.name))

    def is_input(self, value: object) -> bool:
        return id(value) in self.inputs or (isinstance(value, str) and value in self.names)

    def local(self, frame: FrameType, event: str, arg: object) -> None:
        """The trace of a stop's own frame: only its return matters."""
        if event == "return":
            self.frames.pop(id(frame), None)
            if id(frame) == self.front_door:
                self.front_door_done = True

    def __call__(self, frame: FrameType, event: str, arg: object):
        """The global trace: called as each Python frame starts; traces stops' frames further."""
        code = frame.f_code
        room = _room(code.co_filename)
        if room is None or code.co_name.startswith("<"):
            return None
        if code.co_qualname == "get_task":
            self.walk.lookups += 1
        arguments = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        values = [frame.f_locals.get(name) for name in arguments if name != "self"]
        if room != "cli" and frame.f_back is not None and id(frame.f_back) == self.entry_frame:
            for value in values:  # what the command hands the library, with all it holds
                self.add(value)
            if any(dataclasses.is_dataclass(value) for value in values):
                self.front_door = id(frame)  # the call that takes the job's settings
        if not any(self.is_input(value) for value in values):
            return None
        name = f"{room}:{code.co_qualname}"
        handed_by = self._handed_by(frame)
        if self.entry is None:
            self.entry, self.entry_frame = name, id(frame)
        self.frames[id(frame)] = (name, room)
        frame.f_trace_lines = False
        if name not in self.seen:
            self._record(name, room, handed_by)
        return self.local

    def _record(self, name: str, room: str, handed_by: tuple[str, str] | None) -> None:
        self.seen.add(name)
        climb = handed_by is not None and LAYERS[handed_by[1]] < LAYERS[room]
        if handed_by is not None and handed_by[1] == "cli" and room != "cli":
            climb = climb or self.front_door_done
        self.walk.stops.append(Stop(name, room, None if handed_by is None else handed_by[0], climb))

    def _handed_by(self, frame: FrameType) -> tuple[str, str] | None:
        caller = frame.f_back
        while caller is not None:
            if id(caller) in self.frames:
                return self.frames[id(caller)]
            caller = caller.f_back
        return None


def walk(argv: list[str], names: set[str]) -> Walk:
    """Run ``contextvec ARGV`` in-process and follow its input; ``names``: the task/model names
    on the command line that count as input."""
    from contextvec.cli.main import main

    tracer = _Tracer(names)
    parse = argparse.ArgumentParser.parse_args

    def parse_and_keep(parser, *args, **kwargs):
        namespace = parse(parser, *args, **kwargs)
        tracer.add(namespace)
        return namespace

    argparse.ArgumentParser.parse_args = parse_and_keep
    sys.settrace(tracer)
    try:
        tracer.walk.exit_code = main(argv)
    finally:
        sys.settrace(None)
        argparse.ArgumentParser.parse_args = parse
    return tracer.walk


if __name__ == "__main__":
    command = sys.argv[1:]
    print("\n".join(walk(command, {command[1]} if len(command) > 1 else set()).lines()))
