"""Stream readers for replay: CSV with a header, JSON Lines and ARFF (MOA/Weka), each optionally gzipped.

Reading is two-pass. :func:`scan` walks the whole file once, validates every row, infers each
column's kind (``numeric`` when every present value is numeric-looking, ``categorical``
otherwise, or as declared in an ARFF header / forced with ``categorical=``), collects the
class labels in order of appearance and hashes the bytes. :func:`read_examples` then yields
:class:`Example` rows with features already coerced to their column's kind, so the model sees
one consistent type per feature. Because :func:`scan` validates first, a bad file is rejected
before a single row is learned.

Every problem raises :class:`ReaderError` whose message names the file and the row, e.g.
``data.csv: row 7 (line 8): expected 4 fields, found 3``.

Missing values (``''`` and ``'?'`` in CSV/ARFF, ``null`` in JSONL) are left out of the feature
dict; rows whose label is missing are counted in :attr:`FileInfo.n_unlabelled` and skipped.
Labels are strings for CSV and ARFF; JSONL labels keep their JSON type (string, integer or
boolean).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Example",
    "FileInfo",
    "ReaderError",
    "detect_format",
    "read_examples",
    "scan",
]

FORMATS = ("csv", "jsonl", "arff")
MISSING = frozenset({"", "?"})
_NUMBER = re.compile(
    r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]?(?:inf|infinity|nan)$", re.I
)


class ReaderError(ValueError):
    """A malformed input file; the message names the file and, where it applies, the row.

    Parameters
    ----------
    path
        The file being read.
    message
        What is wrong.
    row
        1-based data row number (header and comment lines excluded), if the problem is in a row.
    line
        1-based physical line number in the (decompressed) file, if known.
    """

    def __init__(
        self, path: str | Path, message: str, *, row: int | None = None, line: int | None = None
    ) -> None:
        self.path = str(path)
        self.row = row
        self.line = line
        self.reason = message
        where = self.path
        if row is not None:
            where += f": row {row}" + (f" (line {line})" if line is not None else "")
        elif line is not None:
            where += f": line {line}"
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Example:
    """One labelled row of a stream.

    Attributes
    ----------
    row
        1-based data row number in the file (stable: used to build idempotency keys).
    x
        Features, missing values left out.
    y
        The label.
    """

    row: int
    x: dict[str, float | str]
    y: str | int | bool


@dataclass
class FileInfo:
    """What :func:`scan` learned about a file.

    Attributes
    ----------
    path, format
        The file and its format (``csv``, ``jsonl`` or ``arff``).
    target
        The label column.
    features
        Feature name -> ``"numeric"`` | ``"categorical"``, in column order.
    classes
        Class labels (declared order for ARFF nominal targets, else order of first appearance).
    n_rows
        Number of data rows (labelled or not).
    n_unlabelled
        Rows whose label is missing (skipped by :func:`read_examples`).
    sha1
        Hex SHA-1 of the file's bytes as stored (compressed bytes for ``.gz``).
    columns
        Column names given for a headerless CSV file (``None`` when the file has a header).
    """

    path: Path
    format: str
    target: str
    features: dict[str, str]
    classes: list[Any]
    n_rows: int = 0
    n_unlabelled: int = 0
    sha1: str = ""
    columns: list[str] | None = None
    _arff: _ArffHeader | None = field(default=None, repr=False)

    @property
    def n_examples(self) -> int:
        """Number of labelled rows."""
        return self.n_rows - self.n_unlabelled


def detect_format(path: str | Path) -> str:
    """The format of ``path`` from its suffix (``.csv``/``.tsv``/``.data``, ``.jsonl``/``.ndjson``,
    ``.arff``).

    A trailing ``.gz`` is ignored.

    Examples
    --------
    >>> detect_format("elec.arff.gz")
    'arff'
    >>> detect_format("stream.ndjson")
    'jsonl'
    """
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix in ("csv", "txt", "tsv", "data"):
        return "csv"
    if suffix in ("jsonl", "ndjson", "json"):
        return "jsonl"
    if suffix == "arff":
        return "arff"
    raise ReaderError(
        path, f"cannot tell the format from the name; use one of {', '.join(FORMATS)}"
    )


def is_number(text: str) -> bool:
    """Whether a string looks like a number (``'1'``, ``'-2.5e3'``, ``'.5'``, ``'nan'``).

    Examples
    --------
    >>> is_number("3.25"), is_number("1e-3"), is_number("abc"), is_number("")
    (True, True, False, False)
    """
    return bool(_NUMBER.match(text.strip()))


# --------------------------------------------------------------------------------------------
# low-level line access: decode line by line so a bad byte is reported with its line number


class _Lines:
    """Iterate the decoded lines of a (possibly gzipped) file, tracking the line number."""

    def __init__(self, path: Path, digest: Any | None = None) -> None:
        self.path = path
        self.digest = digest
        self.lineno = 0
        self.header_line: int | None = None

    def _raw(self) -> Iterator[bytes]:
        if self.path.name.lower().endswith(".gz"):
            with self.path.open("rb") as fh:
                hashing = _HashingReader(fh, self.digest)
                try:
                    with gzip.GzipFile(fileobj=hashing) as gz:
                        yield from gz
                except (OSError, EOFError) as exc:
                    raise ReaderError(self.path, f"not a readable gzip file ({exc})") from None
        else:
            with self.path.open("rb") as fh:
                for chunk in fh:
                    if self.digest is not None:
                        self.digest.update(chunk)
                    yield chunk

    def __iter__(self) -> Iterator[str]:
        for raw in self._raw():
            self.lineno += 1
            try:
                text = raw.decode("utf-8-sig" if self.lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise ReaderError(
                    self.path,
                    f"invalid UTF-8 byte 0x{raw[exc.start]:02x} at column {exc.start + 1}",
                    line=self.lineno,
                ) from None
            yield text


class _HashingReader(io.RawIOBase):
    """A read-only file wrapper that feeds every byte read into a hash."""

    def __init__(self, fh: Any, digest: Any | None) -> None:
        self._fh = fh
        self._digest = digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._fh.read(len(buffer))
        if self._digest is not None:
            self._digest.update(data)
        buffer[: len(data)] = data
        return len(data)


# --------------------------------------------------------------------------------------------
# per-format row iterators: yield (row, line, {column: raw value}) with raw values as str for
# CSV/ARFF and JSON values for JSONL. Missing values are left out.


def _csv_rows(
    path: Path, lines: _Lines, columns: list[str] | None = None
) -> tuple[list[str], Iterator[tuple[int, int, dict]]]:
    it: Iterator[str] = iter(lines)
    first = None
    for text in it:
        if text.strip():
            first = text
            break
    if first is None:
        what = "a data row" if columns else "a header row"
        raise ReaderError(path, f"file is empty (expected {what})")
    delimiter = "\t" if "\t" in first and "," not in first else ","
    if columns:  # a headerless file (UCI .data): the first line is data
        header_line = None
        header = [c.strip() for c in columns]
        it = _chain([first], it)
    else:
        header_line = lines.header_line = lines.lineno
        header = next(csv.reader([first], delimiter=delimiter))
        header = [h.strip() for h in header]
    seen: set[str] = set()
    for i, name in enumerate(header):
        if not name:
            raise ReaderError(path, f"header column {i + 1} has no name", line=header_line)
        if name in seen:
            raise ReaderError(path, f"header names column {name!r} twice", line=header_line)
        seen.add(name)

    def rows() -> Iterator[tuple[int, int, dict]]:
        reader = csv.reader(it, delimiter=delimiter, strict=True)
        row = 0
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise ReaderError(
                    path, f"malformed CSV ({exc})", row=row + 1, line=lines.lineno
                ) from None
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # blank line
            row += 1
            if len(fields) != len(header):
                raise ReaderError(
                    path,
                    f"expected {len(header)} fields (as in the header), found {len(fields)}",
                    row=row,
                    line=lines.lineno,
                )
            values = {}
            for name, value in zip(header, fields, strict=True):
                value = value.strip()
                if value not in MISSING:
                    values[name] = value
            yield row, lines.lineno, values

    return header, rows()


def _jsonl_rows(path: Path, lines: _Lines) -> tuple[list[str], Iterator[tuple[int, int, dict]]]:
    it = iter(lines)
    # peek: an empty file (or only blank lines) is an error
    buffered: list[str] = []
    for text in it:
        if text.strip():
            buffered.append(text)
            break
    if not buffered:
        raise ReaderError(path, "file is empty (expected one JSON object per line)")
    first_line = lines.lineno

    def rows() -> Iterator[tuple[int, int, dict]]:
        row = 0
        lineno = first_line
        for text in _chain(buffered, it):
            if buffered:
                buffered.clear()
            else:
                lineno = lines.lineno
            if not text.strip():
                continue
            row += 1
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ReaderError(path, f"invalid JSON ({exc.msg})", row=row, line=lineno) from None
            if not isinstance(obj, dict):
                raise ReaderError(
                    path,
                    f"expected a JSON object, found {type(obj).__name__}",
                    row=row,
                    line=lineno,
                )
            values = {}
            for key, value in obj.items():
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                if isinstance(value, dict | list):
                    raise ReaderError(
                        path,
                        f"field {key!r} is a nested {type(value).__name__}",
                        row=row,
                        line=lineno,
                    )
                if isinstance(value, str) and value.strip() in MISSING:
                    continue
                values[key] = value
            yield row, lineno, values

    return [], rows()


def _chain(first: list[str], rest: Iterable[str]) -> Iterator[str]:
    yield from list(first)
    yield from rest


@dataclass
class _ArffHeader:
    names: list[str]
    kinds: list[str]  # "numeric" | "nominal" | "string"
    nominal: dict[str, list[str]]
    data_line: int


_ARFF_ATTR = re.compile(r"^@attribute\s+", re.I)


def _arff_split(text: str, sep: str = ",") -> list[str]:
    """Split an ARFF line on ``sep`` honouring single and double quotes and backslash escapes."""
    out, cur, quote, i = [], [], None, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = None
            else:
                cur.append(ch)
        elif ch in "'\"":
            quote = ch
        elif ch == sep:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    if quote:
        raise ValueError("unterminated quote")
    out.append("".join(cur).strip())
    return out


def _arff_token(text: str) -> tuple[str, str]:
    """Split a leading (possibly quoted) name off ``text``: returns ``(name, rest)``."""
    text = text.strip()
    if text[:1] in ("'", '"'):
        q = text[0]
        end = 1
        while end < len(text):
            if text[end] == "\\":
                end += 2
                continue
            if text[end] == q:
                break
            end += 1
        if end >= len(text):
            raise ValueError("unterminated quote in attribute name")
        return text[1:end].replace("\\" + q, q), text[end + 1 :].strip()
    parts = text.split(None, 1)
    return parts[0], (parts[1].strip() if len(parts) > 1 else "")


def _arff_header(path: Path, lines: Iterator[str], counter: _Lines) -> _ArffHeader:
    names: list[str] = []
    kinds: list[str] = []
    nominal: dict[str, list[str]] = {}
    saw_anything = False
    for text in lines:
        stripped = text.strip()
        if not stripped or stripped.startswith("%"):
            continue
        saw_anything = True
        low = stripped.lower()
        if low.startswith("@relation"):
            continue
        if _ARFF_ATTR.match(stripped):
            spec = _ARFF_ATTR.sub("", stripped, count=1)
            try:
                name, kind = _arff_token(spec)
            except ValueError as exc:
                raise ReaderError(path, str(exc), line=counter.lineno) from None
            if not kind:
                raise ReaderError(path, f"attribute {name!r} has no type", line=counter.lineno)
            if name in names:
                raise ReaderError(path, f"attribute {name!r} declared twice", line=counter.lineno)
            if kind.startswith("{"):
                if not kind.endswith("}"):
                    raise ReaderError(
                        path, f"attribute {name!r}: unterminated {{...}}", line=counter.lineno
                    )
                try:
                    values = [v for v in _arff_split(kind[1:-1]) if v != ""]
                except ValueError as exc:
                    raise ReaderError(
                        path, f"attribute {name!r}: {exc}", line=counter.lineno
                    ) from None
                nominal[name] = values
                kinds.append("nominal")
            else:
                word = kind.split()[0].lower()
                if word in ("numeric", "real", "integer"):
                    kinds.append("numeric")
                elif word in ("string", "date"):
                    kinds.append("string")
                else:
                    raise ReaderError(
                        path,
                        f"attribute {name!r} has unsupported type {kind!r} "
                        "(numeric, real, integer, string, date or {nominal,values})",
                        line=counter.lineno,
                    )
            names.append(name)
            continue
        if low.startswith("@data"):
            if not names:
                raise ReaderError(path, "@data before any @attribute", line=counter.lineno)
            return _ArffHeader(names, kinds, nominal, counter.lineno)
        raise ReaderError(
            path, f"unexpected line in the ARFF header: {stripped[:40]!r}", line=counter.lineno
        )
    if not saw_anything:
        raise ReaderError(path, "file is empty (expected an ARFF header)")
    raise ReaderError(path, "no @data section")


def _arff_rows(
    path: Path, lines: _Lines, header_out: list[_ArffHeader]
) -> tuple[list[str], Iterator[tuple[int, int, dict]]]:
    it = iter(lines)
    hdr = _arff_header(path, it, lines)
    header_out.append(hdr)
    n = len(hdr.names)

    def rows() -> Iterator[tuple[int, int, dict]]:
        row = 0
        for text in it:
            stripped = text.strip()
            if not stripped or stripped.startswith("%"):
                continue
            row += 1
            values: dict[str, str] = {}
            try:
                if stripped.startswith("{"):  # sparse instance: {index value, ...}
                    body, _, _weight = stripped[1:].partition("}")
                    given = {}
                    for item in _arff_split(body):
                        if not item:
                            continue
                        idx, _, val = item.partition(" ")
                        k = int(idx)
                        if not 0 <= k < n:
                            raise ValueError(f"sparse index {k} out of range 0..{n - 1}")
                        given[k] = _unquote(val.strip())
                    for k, name in enumerate(hdr.names):
                        if k in given:
                            val = given[k]
                        elif hdr.kinds[k] == "numeric":
                            val = "0"
                        elif hdr.kinds[k] == "nominal" and hdr.nominal[name]:
                            val = hdr.nominal[name][0]
                        else:
                            val = ""
                        if val not in MISSING:
                            values[name] = val
                else:
                    body, _, _weight = stripped.partition("{")  # Weka instance weight: ..., {w}
                    fields = _arff_split(body.rstrip().rstrip(",") if _weight else body)
                    if len(fields) != n:
                        raise ValueError(
                            f"expected {n} values (one per @attribute), found {len(fields)}"
                        )
                    for name, val in zip(hdr.names, fields, strict=True):
                        if val not in MISSING:
                            values[name] = val
            except ValueError as exc:
                raise ReaderError(path, str(exc), row=row, line=lines.lineno) from None
            for name, val in values.items():
                k = hdr.names.index(name) if hdr.kinds else 0
                if hdr.kinds[k] == "nominal" and val not in hdr.nominal[name]:
                    raise ReaderError(
                        path,
                        f"{val!r} is not a declared value of nominal attribute {name!r}",
                        row=row,
                        line=lines.lineno,
                    )
                if hdr.kinds[k] == "numeric" and not is_number(val):
                    raise ReaderError(
                        path,
                        f"{val!r} is not a number (attribute {name!r} is numeric)",
                        row=row,
                        line=lines.lineno,
                    )
            yield row, lines.lineno, values

    return list(hdr.names), rows()


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


# --------------------------------------------------------------------------------------------
# public API


def _open_rows(
    path: Path, fmt: str, digest: Any | None = None, columns: list[str] | None = None
) -> tuple[list[str], Iterator[tuple[int, int, dict]], _ArffHeader | None, _Lines]:
    if columns and fmt != "csv":
        raise ReaderError(path, "column names can only be given for CSV files")
    lines = _Lines(path, digest)
    if fmt == "csv":
        header, rows = _csv_rows(path, lines, columns)
        return header, _numbered(rows), None, lines
    if fmt == "jsonl":
        header, rows = _jsonl_rows(path, lines)
        return header, _numbered(rows), None, lines
    if fmt == "arff":
        out: list[_ArffHeader] = []
        header, rows = _arff_rows(path, lines, out)
        return header, _numbered(rows), out[0], lines
    raise ReaderError(path, f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def _numbered(rows: Iterator[tuple[int, int, dict]]) -> Iterator[tuple[int, int, dict]]:
    """Attach the row number to line-level errors (bad bytes) raised while reading data rows."""
    last = 0
    try:
        for item in rows:
            last = item[0]
            yield item
    except ReaderError as exc:
        if exc.row is None and exc.line is not None:
            raise ReaderError(exc.path, exc.reason, row=last + 1, line=exc.line) from None
        raise


def _json_label(path: Path, value: Any, row: int, line: int) -> str | int | bool:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ReaderError(
        path, f"label {value!r} is not a string, integer or boolean", row=row, line=line
    )


def scan(
    path: str | Path,
    *,
    target: str | None = None,
    categorical: Iterable[str] = (),
    fmt: str | None = None,
    limit: int | None = None,
    columns: Iterable[str] | None = None,
) -> FileInfo:
    """Validate a whole file and describe it (columns, kinds, classes, row count, SHA-1).

    Parameters
    ----------
    path
        A ``.csv``, ``.jsonl`` or ``.arff`` file, optionally ending in ``.gz``.
    target
        The label column. Defaults to the last column (the ARFF/MOA convention); required for
        JSONL.
    categorical
        Columns to treat as categorical even if every value looks numeric.
    fmt
        Force a format instead of detecting it from the file name.
    limit
        Only look at the first ``limit`` data rows.
    columns
        Column names of a CSV file without a header row (e.g. UCI ``.data`` files).

    Returns
    -------
    FileInfo

    Raises
    ------
    ReaderError
        On any problem, naming the file and (where it applies) the row.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "s.csv"
    >>> _ = p.write_text("age,dept,y\\n31,cs,yes\\n?,math,no\\n")
    >>> info = scan(p, target="y")
    >>> info.features, info.classes, info.n_rows
    ({'age': 'numeric', 'dept': 'categorical'}, ['yes', 'no'], 2)
    """
    path = Path(path)
    if not path.is_file():
        raise ReaderError(path, "no such file")
    fmt = fmt or detect_format(path)
    columns = list(columns) if columns else None
    forced = list(dict.fromkeys(c for c in categorical if c))
    digest = hashlib.sha1(usedforsecurity=False)
    header, rows, arff, lines = _open_rows(path, fmt, digest, columns)

    if fmt == "jsonl" and target is None:
        raise ReaderError(path, "JSON Lines files need --target (the label field)")
    if header:
        target = target if target is not None else header[-1]
        if target not in header:
            raise ReaderError(
                path,
                f"target column {target!r} not found; columns are {', '.join(header)}",
                line=lines.header_line,
            )
        for name in forced:
            if name not in header:
                raise ReaderError(
                    path,
                    f"--categorical column {name!r} not found; columns are {', '.join(header)}",
                )
    assert target is not None
    if forced and target in forced:
        forced.remove(target)

    order: dict[str, None] = dict.fromkeys(c for c in header if c != target)
    numeric_ok: dict[str, bool] = {}
    classes: dict[Any, None] = {}
    n_rows = n_unlabelled = 0
    for row, line, values in rows:
        if limit is not None and row > limit:
            break
        n_rows = row
        if target not in values:
            n_unlabelled += 1
        else:
            label = values[target]
            if fmt == "jsonl":
                label = _json_label(path, label, row, line)
            classes.setdefault(label, None)
        for name, value in values.items():
            if name == target:
                continue
            if name not in order:
                order[name] = None
            if isinstance(value, bool):
                ok = False
            elif isinstance(value, int | float):
                ok = True
            else:
                ok = is_number(value)
            numeric_ok[name] = numeric_ok.get(name, True) and ok
    if n_rows == 0:
        raise ReaderError(path, "file has no data rows")
    if n_rows - n_unlabelled == 0:
        raise ReaderError(path, f"target {target!r} is missing on every row")

    features: dict[str, str] = {}
    for name in order:
        if arff is not None:
            kind = arff.kinds[arff.names.index(name)]
            features[name] = "numeric" if kind == "numeric" else "categorical"
        else:
            features[name] = "numeric" if numeric_ok.get(name, True) else "categorical"
        if name in forced:
            features[name] = "categorical"
    if fmt == "jsonl":
        for name in forced:
            if name not in features:
                raise ReaderError(path, f"--categorical field {name!r} never appears in the file")

    class_list = list(classes)
    if arff is not None:
        k = arff.names.index(target)
        if arff.kinds[k] == "nominal":
            declared = arff.nominal[target]
            class_list = declared + [c for c in class_list if c not in declared]

    # drain the rest of the file so the SHA-1 covers every byte even with a limit
    if limit is not None:
        for _ in rows:
            pass
    return FileInfo(
        path=path,
        format=fmt,
        target=target,
        features=features,
        classes=class_list,
        n_rows=n_rows,
        n_unlabelled=n_unlabelled,
        sha1=digest.hexdigest(),
        columns=columns,
        _arff=arff,
    )


def _coerce(kind: str, value: Any) -> float | str:
    if kind == "numeric":
        return float(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_examples(info: FileInfo, *, limit: int | None = None, start: int = 1) -> Iterator[Example]:
    """Yield the labelled rows of a file :func:`scan` has validated, in file order.

    Parameters
    ----------
    info
        The result of :func:`scan` on the file.
    limit
        Stop after data row ``limit``.
    start
        Skip data rows before ``start`` (1-based).

    Yields
    ------
    Example
        Features coerced to their column's kind (``float`` or ``str``); unlabelled rows skipped.
    """
    _, rows, _, _ = _open_rows(info.path, info.format, columns=info.columns)
    features = info.features
    for row, line, values in rows:
        if limit is not None and row > limit:
            return
        if row < start or info.target not in values:
            continue
        label = values[info.target]
        if info.format == "jsonl":
            label = _json_label(info.path, label, row, line)
        x: dict[str, float | str] = {}
        for name, value in values.items():
            if name == info.target:
                continue
            kind = features.get(name)
            if kind is None:
                raise ReaderError(
                    info.path, f"field {name!r} was not seen when scanning", row=row, line=line
                )
            x[name] = _coerce(kind, value)
        yield Example(row=row, x=x, y=label)
