"""Summarizes a schemathesis NDJSON event stream (scripts/schemathesis).

For each operation: the test cases generated as valid (positive) and as
invalid (negative) requests, and the statuses the registry answered them
with; then the totals. Shows at a glance whether the write routes were
exercised with bodies the registry accepted, not only with rejections:
exits 1 when an operation never answered 2xx (or nothing was sent).

    python3 scripts/schemathesis_summary.py target/schemathesis/ndjson-*.ndjson
"""

import collections
import json
import sys


def main(paths):
    statuses = collections.defaultdict(collections.Counter)
    for path in paths:
        with open(path) as events:
            for line in events:
                event = json.loads(line)
                finished = event.get("ScenarioFinished")
                if not finished:
                    continue
                recorder = finished["recorder"]
                interactions = recorder.get("interactions", {})
                for case_id, case in recorder.get("cases", {}).items():
                    response = (interactions.get(case_id) or {}).get("response")
                    if not response:
                        continue
                    value = case["value"]
                    mode = value.get("meta", {}).get("generation", {}).get("mode", "?")
                    operation = f"{value['method']} {value['path']}"
                    statuses[(operation, mode)][response["status_code"]] += 1
    total = sum(sum(c.values()) for c in statuses.values())
    print(f"schemathesis: {total} requests; per operation and kind of test case, the statuses answered:")
    documented = {op for (op, _), c in statuses.items() if any(s != 405 for s in c)}
    for (operation, mode), counts in sorted(statuses.items()):
        if operation not in documented:
            continue
        answered = ", ".join(f"{status}: {n}" for status, n in sorted(counts.items()))
        print(f"  {operation:<58} {mode:<8} {answered}")
    undocumented = sum(sum(c.values()) for (op, _), c in statuses.items() if op not in documented)
    print(f"  (and {undocumented} requests with methods a path does not have, all answered 405)")
    by_class = collections.Counter()
    for counts in statuses.values():
        for status, n in counts.items():
            by_class[f"{status // 100}xx"] += n
    print("  by class: " + ", ".join(f"{k}: {v}" for k, v in sorted(by_class.items())))
    never = sorted(
        op
        for op in documented
        if not any(200 <= s < 300 for (o, _), c in statuses.items() if o == op for s in c)
    )
    for operation in never:
        print(f"schemathesis: {operation} never answered 2xx: no valid request reached it")
    return 1 if never or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
