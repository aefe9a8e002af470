"""Stream readers: CSV, JSONL, ARFF (MOA), gzip, type inference, and errors naming file and row."""

from __future__ import annotations

import gzip

import pytest

from app.readers import ReaderError, detect_format, is_number, read_examples, scan

CSV = "age,dept,income,y\n31,cs,1.5e3,yes\n,math,?,no\n45,cs,2000,yes\n"


def write(tmp_path, name, text, *, gz=False, raw=None):
    path = tmp_path / name
    data = raw if raw is not None else text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_csv_types_missing_values_and_order(tmp_path):
    info = scan(write(tmp_path, "s.csv", CSV), target="y")
    assert info.format == "csv"
    assert info.features == {"age": "numeric", "dept": "categorical", "income": "numeric"}
    assert info.classes == ["yes", "no"]
    assert (info.n_rows, info.n_unlabelled) == (3, 0)
    rows = list(read_examples(info))
    assert [r.row for r in rows] == [1, 2, 3]
    assert rows[0].x == {"age": 31.0, "dept": "cs", "income": 1500.0}
    assert rows[1].x == {"dept": "math"}  # '' and '?' are missing: left out
    assert [r.y for r in rows] == ["yes", "no", "yes"]


def test_target_defaults_to_last_column_and_categorical_override(tmp_path):
    path = write(tmp_path, "s.csv", "zip,n,y\n02139,1,a\n94110,2,b\n")
    info = scan(path, categorical=["zip"])
    assert info.target == "y"
    assert info.features == {"zip": "categorical", "n": "numeric"}
    assert next(read_examples(info)).x == {"zip": "02139", "n": 1.0}
    assert scan(path).features["zip"] == "numeric"


def test_mixed_column_becomes_categorical_with_string_values(tmp_path):
    info = scan(write(tmp_path, "s.csv", "a,y\n1,p\nx,q\n2.5,p\n"), target="y")
    assert info.features == {"a": "categorical"}
    assert [e.x["a"] for e in read_examples(info)] == ["1", "x", "2.5"]


def test_unlabelled_rows_are_counted_and_skipped(tmp_path):
    info = scan(write(tmp_path, "s.csv", "a,y\n1,p\n2,?\n3,q\n"), target="y")
    assert (info.n_rows, info.n_unlabelled, info.n_examples) == (3, 1, 2)
    assert [e.row for e in read_examples(info)] == [1, 3]


def test_quoted_csv_fields_and_crlf(tmp_path):
    text = 'name,y\r\n"Smith, J",a\r\n"say ""hi""",b\r\n'
    info = scan(write(tmp_path, "q.csv", text), target="y")
    assert [e.x["name"] for e in read_examples(info)] == ["Smith, J", 'say "hi"']


def test_jsonl_types_and_gzip(tmp_path):
    text = (
        '{"a": 1, "b": "x", "flag": true, "y": "p"}\n'
        "\n"
        '{"a": 2.5, "b": 3, "flag": false, "y": 1}\n'
        '{"a": null, "y": 2.0}\n'
    )
    info = scan(write(tmp_path, "s.jsonl.gz", text, gz=True), target="y")
    assert info.format == "jsonl"
    assert info.features == {"a": "numeric", "b": "categorical", "flag": "categorical"}
    rows = list(read_examples(info))
    assert [r.y for r in rows] == ["p", 1, 2]
    assert rows[0].x == {"a": 1.0, "b": "x", "flag": "true"}
    assert rows[1].x == {"a": 2.5, "b": "3", "flag": "false"}
    assert rows[2].x == {}


ARFF = """% MOA-style header
@relation 'elec'

@attribute date numeric
@attribute day {1,2,3,4,5,6,7}
@attribute 'nswprice' REAL
@attribute "where" {'north side', south}
@attribute class {UP,DOWN}

@data
0.1,2,0.05,'north side',UP
?,3,0.07,south,DOWN
% a comment in the data
{0 5, 4 DOWN}
0.3,?,0.01,south,?
"""


def test_arff_nominal_numeric_quotes_sparse_and_missing(tmp_path):
    info = scan(write(tmp_path, "elec.arff.gz", ARFF, gz=True))
    assert info.format == "arff"
    assert info.target == "class"
    assert info.features == {
        "date": "numeric",
        "day": "categorical",
        "nswprice": "numeric",
        "where": "categorical",
    }
    assert info.classes == ["UP", "DOWN"]  # declared order, as MOA
    rows = list(read_examples(info))
    assert [r.row for r in rows] == [1, 2, 3]  # row 4 has no label
    assert rows[0].x == {"date": 0.1, "day": "2", "nswprice": 0.05, "where": "north side"}
    assert rows[1].x == {"day": "3", "nswprice": 0.07, "where": "south"}
    # sparse rows: omitted numerics are 0, omitted nominals their first value
    assert rows[2].x == {"date": 5.0, "day": "1", "nswprice": 0.0, "where": "north side"}
    assert rows[2].y == "DOWN"


def test_arff_undeclared_nominal_value_names_row(tmp_path):
    text = "@relation r\n@attribute a {x,y}\n@attribute c {p,q}\n@data\nx,p\nz,q\n"
    with pytest.raises(ReaderError, match=r"bad\.arff: row 2 \(line 6\): 'z' is not a declared"):
        scan(write(tmp_path, "bad.arff", text))


def test_sha1_changes_with_content_and_limit_reads_a_prefix(tmp_path):
    a = scan(write(tmp_path, "a.csv", CSV), target="y")
    b = scan(write(tmp_path, "b.csv", CSV.replace("45", "46")), target="y")
    assert a.sha1 != b.sha1 and len(a.sha1) == 40
    limited = scan(tmp_path / "a.csv", target="y", limit=2)
    assert limited.n_rows == 2 and limited.sha1 == a.sha1
    assert [e.row for e in read_examples(limited, limit=2)] == [1, 2]


@pytest.mark.parametrize(
    ("name", "content", "target", "pattern"),
    [
        ("missing.csv", "a,b\n1,2\n", "y", r"missing\.csv: line 1: target column 'y' not found"),
        ("ragged.csv", "a,b,y\n1,2,p\n3,q\n", "y", r"ragged\.csv: row 2 \(line 3\): expected 3"),
        ("empty.csv", "", "y", r"empty\.csv: file is empty"),
        ("blank.jsonl", "\n\n", "y", r"blank\.jsonl: file is empty"),
        ("header.csv", "a,y\n", "y", r"header\.csv: file has no data rows"),
        ("nolabel.csv", "a,y\n1,?\n", "y", r"nolabel\.csv: target 'y' is missing on every row"),
        (
            "bad.jsonl",
            '{"a": 1, "y": 1}\n{"a": 2,\n',
            "y",
            r"bad\.jsonl: row 2 \(line 2\): invalid JSON",
        ),
        (
            "nested.jsonl",
            '{"a": [1], "y": 1}\n',
            "y",
            r"nested\.jsonl: row 1 \(line 1\): field 'a'",
        ),
        ("nodata.arff", "@relation r\n@attribute a numeric\n", None, r"nodata\.arff: no @data"),
        ("type.arff", "@attribute a numeric\n@data\nx\n", None, r"type\.arff: row 1 \(line 3\)"),
    ],
)
def test_bad_files_name_file_and_row(tmp_path, name, content, target, pattern):
    with pytest.raises(ReaderError, match=pattern):
        scan(write(tmp_path, name, content), target=target)


def test_non_utf8_bytes_name_file_row_and_line(tmp_path):
    path = write(tmp_path, "latin.csv", "", raw="a,y\n1,p\n2,caf\xe9\n".encode("latin-1"))
    with pytest.raises(ReaderError) as info:
        scan(path, target="y")
    assert str(info.value) == f"{path}: row 2 (line 3): invalid UTF-8 byte 0xe9 at column 6"
    assert (info.value.row, info.value.line) == (2, 3)


def test_utf8_bom_and_non_ascii_values(tmp_path):
    path = write(tmp_path, "bom.csv", "", raw="\ufeffcity,y\nZürich,a\n".encode())
    info = scan(path, target="y")
    assert next(read_examples(info)).x == {"city": "Zürich"}


def test_unknown_categorical_column_and_jsonl_without_target(tmp_path):
    with pytest.raises(ReaderError, match="--categorical column 'nope' not found"):
        scan(write(tmp_path, "s.csv", CSV), target="y", categorical=["nope"])
    with pytest.raises(ReaderError, match="need --target"):
        scan(write(tmp_path, "s.jsonl", '{"a": 1}\n'))


def test_truncated_gzip_is_a_reader_error(tmp_path):
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(gzip.compress(CSV.encode() * 50)[:-20])
    with pytest.raises(ReaderError, match="cut.csv.gz"):
        scan(path, target="y")


def test_format_detection_and_number_syntax():
    assert detect_format("x.CSV.gz") == "csv"
    assert detect_format("x.ndjson") == "jsonl"
    with pytest.raises(ReaderError, match="cannot tell the format"):
        detect_format("x.parquet")
    assert all(map(is_number, ["1", "-2.5", ".5", "1e-3", "+4", "nan"]))
    assert not any(map(is_number, ["", "1.2.3", "abc", "1,5", "0x10"]))


def test_headerless_csv_with_column_names(tmp_path):
    path = write(tmp_path, "nursery.data", "usual,proper,1,priority\ngreat_pret,improper,3,spec\n")
    info = scan(path, columns=["parents", "form", "children", "class"])
    assert info.format == "csv" and info.target == "class" and info.n_rows == 2
    rows = list(read_examples(info))
    assert rows[0].x == {"parents": "usual", "form": "proper", "children": 1.0}
    assert [r.y for r in rows] == ["priority", "spec"]
    with pytest.raises(ReaderError, match=r"nursery\.data: row 1 \(line 1\): expected 3 fields"):
        scan(path, columns=["a", "b", "class"])
