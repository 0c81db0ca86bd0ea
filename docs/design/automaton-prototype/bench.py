"""Build/query timings and precision for realistic tag sets."""
import json
import random
import statistics
import sys
import time
import uuid

sys.path.insert(0, "/tmp/automaton_spike")
from tagauto import TagIndex, build_regex  # noqa: E402

random.seed(7)
TEAMS = "billing auth search checkout cart payment user inventory shipping notification ledger fraud " \
        "pricing catalog review media gateway metrics logs trace alert config session identity".split()
PARTS = "api worker consumer producer indexer compactor reader writer scheduler cron proxy cache db " \
        "frontend backend sync exporter ingest router".split()
ROLES = "web db cache kafka api worker search batch".split()
ENVS = "prod staging dev qa".split()
REGIONS = "eu us ap sa eu-west-1 us-east-1 us-west-2 ap-south-1".split()
ALNUM = "bcdfghjklmnpqrstvwxz2456789"


def services(n):
    out = set()
    while len(out) < n:
        s = random.choice(TEAMS) + "-" + random.choice(PARTS)
        if len(out) > 400:
            s += random.choice(["", "-v2", "-canary", "-" + random.choice(TEAMS), "-%d" % random.randrange(100)])
        out.add(s)
    return sorted(out)


def hosts(n):
    out = set()
    while len(out) < n:
        out.add("%s-%03d.%s.%s" % (random.choice(ROLES), random.randrange(1000), random.choice(ENVS),
                                   random.choice(REGIONS)))
    return sorted(out)


def pods(n):
    out = set()
    while len(out) < n:
        h = "".join(random.choice(ALNUM) for _ in range(10))
        out.add("%s-%s-%s-%s" % (random.choice(TEAMS), random.choice(PARTS), h,
                                 "".join(random.choice(ALNUM) for _ in range(5))))
    return sorted(out)


def uuids(n):
    return sorted(str(uuid.UUID(int=random.getrandbits(128), version=4)) for _ in range(n))


GEN = {"service": services, "host": hosts, "pod": pods, "uuid": uuids}


def timed(f, reps=5):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        r = f()
        best = min(best, time.perf_counter() - t)
    return r, best * 1e3


QUERIES = [
    ("like", "%prod%", None), ("like", "web-0_2.%", None), ("like", "%a%a%a%a%a%a%a%a%b", None),
    ("like", "%-canary", None), ("like", "100!%%", "!"), ("like", "a\\_b%", None),
    ("regexp", "(a|aa)*b", None), ("regexp", "(.*a){20}", None), ("regexp", "^web-\\d+\\.prod", None),
    ("regexp", "(x+x+)+y", None), ("regexp", "^[0-9a-f]{8}-", None), ("regexp", ".*a.{20}$", None),
    ("regexp", "(?i)web", None), ("regexp", "(a)\\1", None),
]

def main():
    rows, qrows, samples = [], [], []
    for kind, gen in GEN.items():
        universe = gen(12000)
        for n in (10, 100, 1000, 10000):
            vals = random.sample(universe, n)
            others = [u for u in universe if u not in set(vals)][:500] + gen(20000)[:500]
            others = [o for o in others if o not in set(vals)][:500]
            for budget in (64, 256):
                (rx, step, states), t_build = timed(lambda: build_regex(vals, budget), reps=1 if n >= 1000 else 3)
                ix, t_parse = timed(lambda: TagIndex(rx))
                fp = sum(ix.might_equal(o) for o in others) / len(others)
                s0 = random.randrange(len(universe) - n)
                clu = universe[s0:s0 + n]
                crx, cstep, cst = build_regex(clu, budget)
                cix = TagIndex(crx)
                cprobe = [u for u in random.sample(universe, 1000) if not (clu[0] <= u <= clu[-1])][:500]
                cfp = sum(cix.might_equal(o) for o in cprobe) / len(cprobe)
                rows.append(dict(kind=kind, n=n, budget=budget, step=step, states=states, rx_len=len(rx),
                                 rx_bytes=len(rx.encode()), build_ms=round(t_build, 1), parse_ms=round(t_parse, 2),
                                 nfa_states=len(ix.a.fin), eq_fp=round(fp, 3),
                                 cl_step=cstep, cl_len=len(crx), cl_fp=round(cfp, 3)))
                if n <= 1000:
                    samples.append((rx, vals))
                present, absent = vals[0], others[0]
                qs = [("=present", lambda: ix.might_equal(present)), ("=absent", lambda: ix.might_equal(absent)),
                      ("IN 10", lambda: ix.might_in(others[:9] + [present])),
                      ("NOT IN vals", lambda: ix.only_values_in(vals)),
                      ("prefix", lambda: ix.might_start_with(present[:4]))]
                qs += [("%s %r" % (k, p), (lambda k=k, p=p, e=e: ix.might_match(k, p, e))) for k, p, e in QUERIES]
                qs += [("ALL %s %r" % (k, p), (lambda k=k, p=p, e=e: ix.all_match(k, p, e))) for k, p, e in QUERIES]
                for name, f in qs:
                    r, ms = timed(f)
                    qrows.append(dict(kind=kind, n=n, budget=budget, q=name, result=r, ms=ms))
            print(kind, n, [(r["budget"], str(r["step"]), r["states"], r["rx_len"], r["build_ms"], r["eq_fp"])
                            for r in rows[-2:]], flush=True)

    json.dump(rows, open("/tmp/automaton_spike/bench_rows.json", "w"), indent=1)
    json.dump(qrows, open("/tmp/automaton_spike/bench_queries.json", "w"), indent=1)
    json.dump(samples, open("/tmp/automaton_spike/bench_samples.json", "w"))
    print("\nkind    n      B   step             states rxlen  build_ms parse_ms nfa  eq_fp | clustered: step, rxlen, eq_fp")
    for r in rows:
        print("%-7s %-6d %-4d %-16s %-6d %-6d %-8.1f %-8.2f %-4d %.3f | %-16s %-5d %.3f" % (
            r["kind"], r["n"], r["budget"], str(r["step"]), r["states"], r["rx_len"], r["build_ms"], r["parse_ms"],
            r["nfa_states"], r["eq_fp"], str(r["cl_step"]), r["cl_len"], r["cl_fp"]))
    print("\nquery max ms over all sets / median ms")
    by_q = {}
    for q in qrows:
        by_q.setdefault(q["q"], []).append(q["ms"])
    for q, ms in by_q.items():
        print("%-45s max %7.3f  median %7.3f" % (q, max(ms), statistics.median(ms)))


if __name__ == "__main__":
    main()
