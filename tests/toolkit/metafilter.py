"""Helpers several test modules share (once in integration/test_metafilter.py)."""


def ok(row, flt):  # the reference semantics, written independently of the SQL
    for key, cond in flt.items():
        if key == "$and" and not all(ok(row, c) for c in cond):
            return False
        if key == "$or" and not any(ok(row, c) for c in cond):
            return False
        if key.startswith("$"):
            continue
        if not isinstance(cond, dict):
            if row.get(key, object()) != cond:
                return False
            continue
        has, value = key in row, row.get(key)
        if not all(compare(op, has, value, x) for op, x in cond.items()):
            return False
    return True


def compare(op, has, value, x):
    same = has and value == x and type(value) is type(x)
    ordered = has and isinstance(value, str) == isinstance(x, str) and not isinstance(value, bool)
    if op in ("$in", "$nin"):
        found = has and any(value == v and type(value) is type(v) for v in x)
        return found if op == "$in" else has and not found
    if op == "$eq":
        return same
    if op == "$ne":
        return has and not same
    return ordered and {"$gt": value > x, "$gte": value >= x, "$lt": value < x, "$lte": value <= x}[op]
