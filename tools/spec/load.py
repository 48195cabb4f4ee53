"""Stage 1, load: spec text -> raw entries with line numbers.

Reads YAML safely (nodes are composed, never constructed, so no tag can run code),
keeps the line of every key, and rejects what the format does not allow: duplicate
keys, explicit tags, nesting deeper than an entry's lists. Knows nothing of torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from ..stopwatch import lap
from .errors import ErrorSink, Location

# Tags the YAML resolver gives plain scalars, lists and maps; anything else was
# written explicitly (`!!python/object`, `!foo`) and is refused.
_PLAIN_TAGS = frozenset(
    "tag:yaml.org,2002:" + name
    for name in ("str", "int", "float", "bool", "null", "seq", "map", "timestamp")
)


@dataclass(frozen=True)
class RawScalar:
    text: str
    kind: str  # "str", "int", "bool", "null", ... as YAML resolved it
    location: Location


@dataclass(frozen=True)
class RawList:
    items: tuple[RawScalar, ...]
    location: Location


RawValue = RawScalar | RawList


@dataclass(frozen=True)
class RawField:
    key: str
    value: RawValue
    location: Location


@dataclass(frozen=True)
class RawEntry:
    location: Location
    fields: tuple[RawField, ...]

    def get(self, key: str) -> RawField | None:
        return next((f for f in self.fields if f.key == key), None)

    @property
    def name_text(self) -> str | None:
        field = self.get("name")
        if field is not None and isinstance(field.value, RawScalar):
            return field.value.text
        return None


def load_spec(data: bytes, path: str, sink: ErrorSink) -> list[RawEntry]:
    """Parse spec bytes into raw entries; problems go to `sink`."""
    start = Location(path, 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        sink.report("file is not UTF-8 text", Location(path, line))
        return []
    try:
        root = _compose(text)
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        sink.report(
            f"invalid YAML: character {chr(exc.character)!r} is not allowed",
            Location(path, line),
        )
        return []
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = _yaml_problem(exc.context, exc.problem)
        sink.report(f"invalid YAML: {problem}", Location(path, line))
        return []
    except yaml.YAMLError as exc:
        sink.report(f"invalid YAML: {exc}", start)
        return []
    except RecursionError:
        sink.report("invalid YAML: nesting is too deep", start)
        return []
    if root is None:
        sink.report("spec is empty: expected a list of entries", start)
        return []
    if root.tag not in _PLAIN_TAGS:
        sink.report(_tag_message(root), _loc(path, root))
        return []
    if not isinstance(root, yaml.SequenceNode):
        sink.report(
            "spec must be a list of entries (each starting with '- name:')",
            _loc(path, root),
        )
        return []
    entries = []
    for item in root.value:
        entry = _load_entry(item, path, sink)
        if entry is not None:
            entries.append(entry)
    lap("load")
    return entries


def _compose(text: str) -> yaml.Node | None:
    """Compose with libyaml where PyYAML was built with it (about 5x faster on the
    spec), keeping the same nodes and marks. Its error messages and offsets differ
    from the pure-Python loader's (byte offsets, other wording), so a spec libyaml
    refuses is composed again by the pure-Python loader, whose error is the one
    reported."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.compose(text, Loader=fast)
        except (yaml.YAMLError, RecursionError):
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader)


def _yaml_problem(context: str | None, problem: str | None) -> str:
    if context and problem:
        if problem.startswith("but "):
            return f"{context} {problem}"
        return f"{problem} ({context})"
    return problem or context or "malformed YAML"


def _tag_message(node: yaml.Node, key: str | None = None) -> str:
    if node.tag == "tag:yaml.org,2002:merge":
        return "YAML merge keys ('<<') are not allowed"
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    where = f"'{key}': " if key else ""
    return f"{where}explicit YAML tag {tag} is not allowed"


def _loc(path: str, node: yaml.Node) -> Location:
    return Location(path, node.start_mark.line + 1)


def _load_entry(node: yaml.Node, path: str, sink: ErrorSink) -> RawEntry | None:
    if node.tag not in _PLAIN_TAGS:
        sink.report(_tag_message(node), _loc(path, node))
        return None
    if not isinstance(node, yaml.MappingNode):
        sink.report("each entry must be a mapping with a 'name:' key", _loc(path, node))
        return None
    fields: list[RawField] = []
    seen: dict[str, Location] = {}
    errors_before = len(sink.errors)
    for key_node, value_node in node.value:
        location = _loc(path, key_node)
        if key_node.tag not in _PLAIN_TAGS:
            sink.report(_tag_message(key_node), location)
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            sink.report("keys must be plain names", location)
            continue
        key = key_node.value
        if key in seen:
            sink.report(
                f"duplicate key '{key}' (first at line {seen[key].line})", location
            )
            continue
        seen[key] = location
        value = _load_value(value_node, path, key, sink)
        if value is not None:
            fields.append(RawField(key, value, location))
    if len(sink.errors) > errors_before:
        return None  # a damaged entry would only add follow-on errors
    return RawEntry(_loc(path, node), tuple(fields))


def _load_value(
    node: yaml.Node, path: str, key: str, sink: ErrorSink
) -> RawValue | None:
    if node.tag not in _PLAIN_TAGS:
        sink.report(_tag_message(node, key), _loc(path, node))
        return None
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node, path)
    if isinstance(node, yaml.SequenceNode):
        items = []
        for item in node.value:
            if item.tag not in _PLAIN_TAGS:
                sink.report(_tag_message(item, key), _loc(path, item))
                return None
            if not isinstance(item, yaml.ScalarNode):
                sink.report(
                    f"'{key}': list items must be plain values", _loc(path, item)
                )
                return None
            items.append(_scalar(item, path))
        return RawList(tuple(items), _loc(path, node))
    sink.report(
        f"'{key}': expected a formula or a list, not a mapping", _loc(path, node)
    )
    return None


def _scalar(node: yaml.ScalarNode, path: str) -> RawScalar:
    kind = node.tag.rsplit(":", 1)[-1]
    return RawScalar(node.value, kind, _loc(path, node))


def known_fields(
    entry: RawEntry, allowed: tuple[str, ...], sink: ErrorSink
) -> dict[str, RawField] | None:
    """An entry's fields by key; None (reported) where a key is not `allowed`."""
    fields = {}
    for field in entry.fields:
        if field.key not in allowed:
            sink.report(
                f"unknown key {field.key!r} (allowed: {', '.join(allowed)})",
                field.location,
            )
            return None
        fields[field.key] = field
    return fields
