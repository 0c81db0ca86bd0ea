import sys, time, random; sys.path.insert(0, "/tmp/automaton_spike")
from tagauto import *
from bench import GEN
random.seed(5)
stores = {}
for kind, n, B in [("uuid", 100, 256), ("service", 100, 256), ("host", 100, 256), ("pod", 1000, 256)]:
    vals = random.sample(GEN[kind](5000), n)
    rx = build_regex(vals, B)[0]; stores[f"{kind}{n}@{B}"] = TagIndex(rx)
stores["trunc-chain"] = TagIndex(build_regex(["".join(random.choice("abcxyz-.") for _ in range(300)) for _ in range(50)], 256)[0])
stores["any"] = TagIndex(r"^[\s\S]*$")
pats = [("regexp", "(.*a){20}"), ("regexp", "(.*a){20}b$"), ("like", "%a%a%a%a%a%a%a%a%b"), ("regexp", "(a|aa)*b"),
        ("regexp", "(x+x+)+y"), ("regexp", "(a?){1000}"), ("regexp", "((a|b)?){300}c"), ("regexp", "[^x]{0,1000}z"),
        ("regexp", ".*a.{20}$"), ("regexp", "a" * 5000), ("regexp", "(" * 3000 + "a" + ")" * 3000),
        ("regexp", "(((a*)*)*)*b"), ("regexp", "(.{0,30}){30}q"), ("like", "%" + "_%" * 200 + "q"),
        ("regexp", "(?:[0-9a-f]{1,8}-){1,40}z"), ("regexp", "\\w+\\d+\\s*[^a-z]{2,50}$")]
worst = {}
for name, ix in stores.items():
    for k, p in pats:
        for fn in ("might_match", "all_match"):
            ms = 1e9
            for _ in range(3):
                t = time.perf_counter(); r = getattr(ix, fn)(k, p); ms = min(ms, (time.perf_counter() - t) * 1e3)
            key = (fn, p[:40]); worst[key] = max(worst.get(key, (0, None))[0], ms), r
print("nfa states:", {n: len(ix.a.fin) for n, ix in stores.items()})
for (fn, p), (ms, r) in worst.items():
    print(f"{fn:12s} {p!r:44s} worst {ms:8.2f} ms   (last answer {r})")
