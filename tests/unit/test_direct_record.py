"""A record a program hands over is read from its dict (``direct_record``) as its JSON line would be read
(``fast_record``): the same fields, vector and model, or None where the line's reading is needed."""

import math

import numpy as np
import orjson
import pytest

from ragstore.ingest.fast import direct_record, fast_record
from ragstore.ingest.programs import record_lines

VECTOR = [0.25, -1.5, 3.0, 0.125]


def base(**changes):
    record = {"chunk_id": "c1", "package_path": "p", "text": "a text", "metadata": {"k": "v"}, "vector": VECTOR}
    record.update(changes)
    return {k: v for k, v in record.items() if v is not DROP}


DROP = object()

CASES = {
    "plain": base(),
    "no metadata": base(metadata=DROP),
    "null metadata": base(metadata=None),
    "empty metadata": base(metadata={}),
    "nested metadata": base(metadata={"a": [1, {"b": [2.5, None, True]}], "c": "[{"}),
    "no vector": base(vector=DROP),
    "numpy float32 vector": base(vector=np.asarray(VECTOR, dtype=np.float32)),
    "numpy float64 vector": base(vector=np.asarray(VECTOR)),
    "numpy float16 vector": base(vector=np.asarray(VECTOR, dtype=np.float16)),
    "numpy int vector": base(vector=np.arange(4)),
    "numpy 2-d vector": base(vector=np.ones((1, 4))),
    "empty vector": base(vector=[]),
    "empty numpy vector": base(vector=np.zeros(0)),
    "model": base(model="m"),
    "model without vector": base(model="m", vector=DROP),
    "model not text": base(model=3),
    "extra key": base(extra=1),
    "id not text": base(chunk_id=7),
    "blank id": base(chunk_id="  "),
    "empty id": base(chunk_id=""),
    "long id": base(chunk_id="x" * 5000),
    "package not text": base(package_path=None),
    "text not text": base(text=3),
    "long text": base(text="x" * 3_000_000),
    "NUL in text": base(text="a\x00b"),
    "escaped NUL in text": base(text="a\\u0000b"),
    "NUL in id": base(chunk_id="a\x00"),
    "NUL in model": base(model="m\x00"),
    "NUL in metadata": base(metadata={"k": "\x00"}),
    "NUL in metadata key": base(metadata={"\x00": 1}),
    "brackets at the limit": base(text="[" * 61),
    "brackets past the limit": base(text="[" * 62),
    "braces in metadata past the limit": base(metadata={"k": "{" * 70}),
    "metadata a list": base(metadata=[1]),
    "vector a tuple": base(vector=tuple(VECTOR)),
    "vector a text": base(vector="0.1"),
    "NaN metadata": base(metadata=math.nan),
}


@pytest.mark.parametrize("name", list(CASES))
def test_direct_reading_agrees_with_the_line(name):
    record = CASES[name]
    line = orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY)
    direct = direct_record(record)
    parsed = fast_record(line)
    if direct is None:
        return  # the pass reads the line then: nothing to agree on
    assert parsed is not None, f"{name}: read directly, but the line goes to pydantic"
    (fields, vector, model), (line_fields, line_vector, line_model) = direct, parsed
    assert fields == line_fields and model == line_model
    if line_vector is None:
        assert vector is None
    else:
        assert np.array_equal(np.asarray(vector, dtype=np.float64), np.asarray(line_vector, dtype=np.float64))


def test_the_common_records_are_read_directly():
    for name in ("plain", "no metadata", "null metadata", "nested metadata", "numpy float32 vector", "model"):
        assert direct_record(CASES[name]) is not None, name
    assert direct_record(CASES["brackets at the limit"]) is not None
    assert direct_record(CASES["brackets past the limit"]) is None
    assert fast_record(orjson.dumps(CASES["brackets past the limit"])) is None


def test_a_record_line_keeps_a_copy_of_its_vector():
    vector = list(VECTOR)
    array = np.asarray(VECTOR, dtype=np.float32)
    lines = list(record_lines([base(vector=vector), base(vector=array)]))
    vector[0] = 9.0
    array[0] = 9.0
    for line in lines:
        assert line.record is not None and line.record["vector"][0] == 0.25
        read = direct_record(line.record)
        assert read is not None and read[1][0] == 0.25
