"""Trimmed-automaton tag index: prototype.

build_regex(values, budget) -> anchored regex (Python re / Java Pattern compatible) whose language is a superset of
the value set and whose minimal DFA has <= budget states.  TagIndex(regex) answers "might some value match?" for
=, IN, !=, NOT IN, starts_with, LIKE and REGEXP_LIKE by NFA x NFA product emptiness (no backtracking).
Alphabet = Unicode code points; every transition is labelled with a range (lo, hi).
"""
from __future__ import annotations

import random
import re

MAXCP = 0x10FFFF
FULL = ((0, MAXCP),)


class Unsupported(Exception):
    """Pattern syntax outside the supported subset -> caller answers "might match"."""


class TooComplex(Exception):
    """Automaton/product over the work cap -> caller answers "might match"."""


# ---------------------------------------------------------------- code-point range sets
def norm(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def complement(ranges):
    out, prev = [], 0
    for lo, hi in norm(ranges):
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAXCP:
        out.append((prev, MAXCP))
    return tuple(out)


# ---------------------------------------------------------------- build: minimal acyclic DFA (Daciuk, sorted input)
SEP = frozenset(map(ord, " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"))


def key_of(level, c):
    """Generalisation ladder: symbol classes; an edge keeps the set of real chars seen on it."""
    if level >= 5:
        return -6                                   # any char (length + per-position char sets survive)
    if level == 4:
        return c if c in SEP else -5                # keep ASCII punctuation/separators exact
    if level == 0:
        return c
    if 48 <= c <= 57:
        return -4 if level == 3 else -1             # digits
    if level >= 2 and (97 <= c <= 122 or 65 <= c <= 90):
        return -4 if level == 3 else (-2 if c >= 97 else -3)
    return c


class TooBig(Exception):
    pass


def build_dfa(words, cap, merge=False):
    """words: sorted list of (keys, chars, fin) with fin 1 = accept, 2 = accept anything from here (truncated).
    Returns (fin, edges) of the minimal DFA, edges[s] = {target: ranges}; raises TooBig above `cap` states.
    merge=True: states with the same key structure are merged and their edge labels united (over-approximates)."""
    kids, lab, fin = [{}], [{}], [0]
    reg, path, prev = {}, [0], ()

    def register(j):                                # replace path[j] by an equivalent registered state
        s = path[j]
        ks = sorted(kids[s])
        sig = (fin[s], tuple((k, kids[s][k]) if merge else (k, kids[s][k], frozenset(lab[s][k])) for k in ks))
        q = reg.setdefault(sig, s)
        if q != s:
            kids[path[j - 1]][prev[j - 1]] = q
            if merge:
                for k in ks:
                    lab[q][k] |= lab[s][k]
        if len(reg) >= cap:
            raise TooBig

    for keys, chars, f in words:
        i, n = 0, min(len(prev), len(keys))
        while i < n and prev[i] == keys[i]:
            lab[path[i]][keys[i]].add(chars[i])
            i += 1
        if fin[path[i]] == 2:                       # absorbed by an "anything follows" state
            continue
        for j in range(len(path) - 1, i, -1):
            register(j)
        del path[i + 1:]
        for j in range(i, len(keys)):
            kids.append({}), lab.append({}), fin.append(0)
            t = len(fin) - 1
            kids[path[-1]][keys[j]] = t
            lab[path[-1]][keys[j]] = {chars[j]}
            path.append(t)
        fin[path[-1]] = max(fin[path[-1]], f)
        if f == 2:
            kids[path[-1]].clear()
        prev = keys
    for j in range(len(path) - 1, 0, -1):
        register(j)
    order, index = [0], {0: 0}                      # renumber reachable states, group edge labels by target
    for s in order:
        for t in kids[s].values():
            if t not in index:
                index[t] = len(order)
                order.append(t)
    edges = []
    for s in order:
        by_t = {}
        for k, t in kids[s].items():
            by_t.setdefault(index[t], set()).update(lab[s][k])
        edges.append({t: norm((c, c) for c in cs) for t, cs in by_t.items()})
    return [fin[s] for s in order], edges


LADDER = [(0, False), (1, False), (1, True), (2, True), (3, True), (4, True), (5, True)]


def dfa_accepts(fin, edges, word):
    s = 0
    for ch in word:
        if fin[s] == 2:
            return True
        c = ord(ch)
        s = next((t for t, r in edges[s].items() if any(lo <= c <= hi for lo, hi in r)), None)
        if s is None:
            return False
    return fin[s] > 0


def near_misses(vals, n, seed=0):
    """Plausible other tags: segments (split at separators) recombined across values with the same shape,
    or one char replaced by another of its class (digit, a-z, A-Z)."""
    rnd, out, vs = random.Random(seed), set(), sorted(vals)
    by_shape = {}
    for v in vs:
        segs = re.split(r"([-._/:@ ]+)", v)
        by_shape.setdefault(len(segs), []).append(segs)
    classes = ["0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    for _ in range(4 * n):
        v = rnd.choice(vs)
        if rnd.random() < 0.7:
            group = by_shape[len(re.split(r"([-._/:@ ]+)", v))]
            w = "".join(rnd.choice(group)[i] for i in range(len(group[0])))
        elif v:
            i = rnd.randrange(len(v))
            pool = next((c for c in classes if v[i] in c), v)
            w = v[:i] + rnd.choice(pool) + v[i + 1:]
        else:
            continue
        if w not in vals:
            out.add(w)
            if len(out) >= n:
                break
    return list(out)


def build_regex(values, budget=64, max_len=4096, probes=200):
    """-> (regex, how, states); how = (level, merged, truncation depth or None); (0, False, None) = exact.
    The first ladder rung that fits competes with the deepest prefix truncation at each finer rung; the
    candidate accepting the fewest near-miss strings wins."""
    vals = sorted(set(values))
    if not vals:
        return r"^[^\s\S]$", (0, False, None), 1
    cps = [[ord(ch) for ch in v] for v in vals]
    if any(0xD800 <= c <= 0xDFFF for w in cps for c in w):
        return r"^[\s\S]*$", (5, True, 0), 1     # lone surrogates: Java and Python disagree; not from UTF-8
    longest, by_level = max(map(len, cps)), {}

    def attempt(level, merge, depth):
        if level not in by_level:
            by_level[level] = sorted(((tuple(key_of(level, c) for c in w), w) for w in cps), key=lambda t: t[0])
        words = [(k, w, 1) if depth is None or len(k) <= depth else (k[:depth], w, 2) for k, w in by_level[level]]
        try:
            fin, edges = build_dfa(words, budget, merge)
        except TooBig:
            return None
        rx = emit(fin, edges)
        return (rx, (level, merge, depth), len(fin), fin, edges) if len(rx) <= max_len else None

    cands = []
    for rung, (level, merge) in enumerate(LADDER):
        full = attempt(level, merge, None)
        if full:
            if rung == 0:
                return full[:3]
            cands.append(full)
            break
    for level, merge in [lm for lm in LADDER[:rung] if lm in ((0, False), (1, True), (2, True))] + \
            ([] if cands else [LADDER[-1]]):
        lo, hi, best = 0, longest - 1, None
        while lo <= hi:                             # deepest truncation that fits (monotone in depth)
            mid = (lo + hi) // 2
            got = attempt(level, merge, mid)
            if got:
                best, lo = got, mid + 1
            else:
                hi = mid - 1
        if best:
            cands.append(best)
    if not cands:
        return r"^[\s\S]*$", (5, True, 0), 1
    if len(cands) == 1:
        return cands[0][:3]
    miss = near_misses(set(vals), probes)
    score = [(sum(dfa_accepts(c[3], c[4], w) for w in miss), len(c[0]), i) for i, c in enumerate(cands)]
    return cands[min(score)[2]][:3]


# ---------------------------------------------------------------- emit: state elimination over a tiny regex AST
EPS = ("e",)


def cat(*xs):
    items = []
    for x in xs:
        if x is None:
            return None
        items.extend(x[1] if x[0] == "cat" else () if x == EPS else (x,))
    return EPS if not items else items[0] if len(items) == 1 else ("cat", tuple(items))


def star(x):
    return EPS if x == EPS else x if x[0] == "star" else star(x[1]) if x[0] == "opt" else ("star", x)


def alt(a, b):
    if a is None or b is None:
        return a if b is None else b
    mem, eps, chars = [], False, ()
    stack = [b, a]
    while stack:
        x = stack.pop()
        if x == EPS:
            eps = True
        elif x[0] in ("alt", "opt"):
            eps |= x[0] == "opt"
            stack.extend(reversed(x[1]) if x[0] == "alt" else (x[1],))
        elif x[0] == "c":
            chars += x[1]
        elif x not in mem:
            mem.append(x)
    if chars:
        mem.insert(0, ("c", norm(chars)))
    for end in (0, -1):                             # factor common first (then last) items
        groups = {}
        for m in mem:
            groups.setdefault((m[1][end] if m[0] == "cat" else m), []).append(m)
        if len(groups) < len(mem) and (end == 0 or len(groups) == 1) and not (end and eps):
            mem = []
            for k, ms in groups.items():
                rest = None
                for m in ms:
                    r = (cat(*m[1][1:]) if end == 0 else cat(*m[1][:-1])) if m[0] == "cat" else EPS
                    rest = r if rest is None else alt(rest, r)
                mem.append(cat(k, rest) if end == 0 else cat(rest, k))
    if not mem:
        return EPS
    x = mem[0] if len(mem) == 1 else ("alt", tuple(mem))
    return ("opt", x) if eps and x[0] not in ("star", "opt") else x


META = frozenset(map(ord, "\\.^$|?*+()[]{}"))


def esc(c, in_class=False):
    """Outside classes only regex metacharacters are escaped; inside, every ASCII punctuation char (Java reads
    `[a&&b]`, `[a[b]]`; Python warns on `--`, `&&`, `~~`, `||`). Backslash + ASCII punctuation is a literal in
    Java, Python and RE2. Non-printables: \\xhh / \\uhhhh. Astral code points: the literal character, never a
    surrogate pair escape (Python reads \\ud83d\\ude00 as two lone surrogates, Java as one emoji)."""
    if c < 128:
        ch = chr(c)
        if ch.isalnum() or (32 <= c < 127 and not in_class and c not in META):
            return ch
        return "\\" + ch if 32 <= c < 127 else "\\x%02x" % c
    if c < 0x100 and not chr(c).isprintable():
        return "\\x%02x" % c
    if c < 0x10000 and not chr(c).isprintable():
        return "\\u%04x" % c
    return chr(c)                                   # printable BMP and all astral code points: literal


def show(x):
    k = x[0]
    if k == "e":
        return ""
    if k == "c":
        r = x[1]
        if r == FULL:
            return r"[\s\S]"
        if len(r) == 1 and r[0][0] == r[0][1]:
            return esc(r[0][0])
        e = lambda c: esc(c, True)  # noqa: E731
        return "[" + "".join(e(a) if a == b else e(a) + e(b) if b == a + 1 else e(a) + "-" + e(b) for a, b in r) + "]"
    if k == "alt":
        return "|".join(show(m) for m in x[1])
    if k in ("opt", "star"):
        return atom(x[1], True) + ("?" if k == "opt" else "*")    # strict: never emit `a??`/`a*+` (lazy/possessive)
    out, items, i = [], x[1], 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[i]:
            j += 1
        if j == i and i + 1 < len(items) and items[i + 1] == ("star", items[i]):
            out.append(atom(items[i], True) + "+")
            i += 2
            continue
        n = j - i + 1
        one = show(items[i]) if items[i][0] != "alt" else atom(items[i])
        if n > 1:
            rep = atom(items[i], True) + "{%d}" % n
            one = rep if len(rep) < len(one) * n else one * n
        out.append(one)
        i = j + 1
    return "".join(out)


def atom(x, strict=False):
    return show(x) if x[0] == "c" or (not strict and x[0] in ("opt", "star")) else "(?:" + show(x) + ")"


def emit(fin, edges):
    n = len(fin)
    S, F = n, n + 1
    out = {S: {0: EPS}, F: {}}
    inc = {0: {S: EPS}, F: {}}
    for s in range(n):
        out.setdefault(s, {})
        inc.setdefault(s, {})
    for s in range(n):
        if fin[s] == 2:
            out[s][s] = ("c", FULL)
            inc[s][s] = ("c", FULL)
        if fin[s]:
            out[s][F], inc[F][s] = EPS, EPS
        for t, r in edges[s].items():
            out[s][t] = inc[t][s] = ("c", r)
    alive = set(range(n))
    while alive:
        k = min(alive, key=lambda s: (len(inc[s]) - (s in inc[s])) * (len(out[s]) - (s in out[s])))
        alive.discard(k)
        loop = out[k].pop(k, None)
        inc[k].pop(k, None)
        mid = EPS if loop is None else star(loop)
        for i, e1 in inc[k].items():
            del out[i][k]
            for j, e3 in out[k].items():
                e = alt(out[i].get(j), cat(e1, mid, e3))
                out[i][j] = inc[j][i] = e
        for j in out[k]:
            del inc[j][k]
    x = out[S].get(F)
    if x is None:
        return r"^[^\s\S]$"
    return "^" + (show(x) if x == EPS or x[0] != "alt" else "(?:" + show(x) + ")") + "$"


# ---------------------------------------------------------------- parse: Java-regex subset -> AST
_ESC1 = {"t": 9, "n": 10, "r": 13, "f": 12, "a": 7, "e": 27}
_CLS = {"d": ((48, 57),), "w": ((48, 57), (65, 90), (95, 95), (97, 122)), "s": ((9, 10), (12, 13), (32, 32))}
NON_ASCII = ((0x80, MAXCP),)
# Engine-agnostic reading (Java, RE2, Python differ on \s \d \w, '.', '$'):
#   over  (might match):  \d = [0-9] + all non-ASCII, \D = not [0-9], '.' = any, '$' = end or before a line end
#   under (all match):    \d = [0-9],                 \D = ASCII non-digit, '.' = not a line end, '$' = end
_QUANT = re.compile(r"\{(\d{1,4})(,(\d{0,4}))?\}")
LINE_END = ("c", ((10, 10), (13, 13), (0x85, 0x85), (0x2028, 0x2029)))


class _Parser:
    def __init__(self, s, over=True):
        self.s, self.i, self.over = s, 0, over

    def peek(self, k=0):
        return self.s[self.i + k] if self.i + k < len(self.s) else None

    def alt(self):
        items = [self.cat()]
        while self.peek() == "|":
            self.i += 1
            items.append(self.cat())
        return items

    def cat(self):
        items = []
        while self.peek() not in (None, "|", ")"):
            items.append(self.repeat())
        return ("cat", tuple(items))

    def repeat(self):
        a = self.atom()
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{":
                m = _QUANT.match(self.s, self.i)
                if not m:
                    raise Unsupported("brace")
                lo = int(m[1])
                hi = lo if m[2] is None else int(m[3]) if m[3] else None
                if hi is not None and hi < lo:
                    raise Unsupported("range")
                self.i = m.end()
            else:
                return a
            if self.peek() == "+":
                raise Unsupported("possessive")
            if self.peek() == "?":
                self.i += 1                          # lazy quantifier: same language
            if a[0] in ("bol", "eol"):
                raise Unsupported("quantified anchor")
            a = ("rep", a, lo, hi)

    def atom(self):
        c = self.peek()
        if c == "(":
            if self.s.startswith("(?:", self.i):
                self.i += 3
            elif self.s.startswith("(?<", self.i) and self.peek(3) not in ("=", "!"):
                self.i = self.s.index(">", self.i) + 1 if ">" in self.s[self.i:] else len(self.s)
            elif self.peek(1) == "?":
                raise Unsupported("lookaround/flags/atomic")
            else:
                self.i += 1
            inner = self.alt()
            if self.peek() != ")":
                raise Unsupported("unbalanced")
            self.i += 1
            return ("alt", tuple(inner)) if len(inner) > 1 else inner[0]
        if c == "[":
            return ("c", self.char_class())
        if c in ("*", "+", "?", "{"):
            raise Unsupported("dangling quantifier")
        self.i += 1
        if c == ".":
            return ("c", FULL if self.over else complement(LINE_END[1]))
        if c == "^":
            return ("bol",)
        if c == "$":
            return ("eol",)
        if c == "\\":
            if self.peek() == "Q":
                end = self.s.find("\\E", self.i + 1)
                end = len(self.s) if end < 0 else end
                lit = self.s[self.i + 1:end]
                self.i = end + 2
                return ("cat", tuple(("c", ((ord(ch), ord(ch)),)) for ch in lit))
            return ("c", self.escape())
        return ("c", ((ord(c), ord(c)),))

    def escape(self):                                # after the backslash; returns ranges
        c = self.peek()
        if c is None:
            raise Unsupported("trailing backslash")
        self.i += 1
        if c.lower() in _CLS:
            r = _CLS[c.lower()]
            if c in "sS":
                r = norm(r + ((11, 11),)) if self.over == c.islower() else r   # Java \s has \x0B, RE2 not
            if c.isupper():
                return complement(r if self.over else norm(r + NON_ASCII))
            return norm(r + NON_ASCII) if self.over else r
        if c in _ESC1:
            v = _ESC1[c]
        elif c == "x":
            m = re.compile(r"\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{2})").match(self.s, self.i)
            if not m:
                raise Unsupported("\\x")
            self.i = m.end()
            v = int(m[1] or m[2], 16)
        elif c == "u":
            m = re.compile(r"[0-9a-fA-F]{4}").match(self.s, self.i)
            if not m:
                raise Unsupported("\\u")
            self.i, v = m.end(), int(m[0], 16)
            m2 = re.compile(r"\\u(d[c-f][0-9a-f]{2})", re.I).match(self.s, self.i)
            if 0xD800 <= v < 0xDC00 and m2:           # Java: \uD83D\uDE00 is one code point
                self.i, v = m2.end(), 0x10000 + ((v - 0xD800) << 10) + int(m2[1], 16) - 0xDC00
        elif c == "0":
            m = re.compile(r"[0-3]?[0-7]{1,2}").match(self.s, self.i)
            if not m:
                raise Unsupported("\\0")
            self.i, v = m.end(), int(m[0], 8)
        elif c.isascii() and c.isalnum():
            raise Unsupported("\\" + c)              # backrefs, \b \B \A \z \Z \G \p \k \R \h \v \c ...
        else:
            v = ord(c)
        if v > MAXCP:
            raise Unsupported("code point")
        return ((v, v),)

    def char_class(self):
        self.i += 1
        neg = self.peek() == "^"
        self.i += neg
        if self.peek() == "]":
            raise Unsupported("[] is read differently by Java and RE2/Python")
        items = []
        while True:
            c = self.peek()
            if c is None or c == "[" or (c == "&" and self.peek(1) == "&"):
                raise Unsupported("class syntax")
            if c == "]":
                self.i += 1
                break
            lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", None):
                self.i += 1
                hi = self.class_atom()
                if len(lo) != 1 or len(hi) != 1 or lo[0][0] != lo[0][1] or hi[0][0] != hi[0][1] or hi < lo:
                    raise Unsupported("class range")
                items.append((lo[0][0], hi[0][0]))
            else:
                items.extend(lo)
        r = norm(items)
        return complement(r) if neg else r

    def class_atom(self):
        c = self.peek()
        if c == "\\":
            self.i += 1
            if self.peek() in ("Q", "b"):
                raise Unsupported("class escape")
            return self.escape()
        self.i += 1
        return ((ord(c), ord(c)),)


def _no_anchor(x):
    if x[0] in ("bol", "eol"):
        raise Unsupported("anchor inside the pattern")
    if x[0] in ("cat", "alt"):
        for y in x[1]:
            _no_anchor(y)
    elif x[0] == "rep":
        _no_anchor(x[1])


def parse(pattern, find=True, over=True):
    """-> AST of the language. find=True: REGEXP_LIKE (match anywhere, ^/$ honoured); False: full match.
    over=True: a superset of what any engine matches (for "might match"); False: a subset (for "all match")."""
    p = _Parser(pattern, over)
    alts = p.alt()
    if p.i != len(pattern):
        raise Unsupported("unbalanced )")
    anything = ("rep", ("c", FULL), 0, None)
    out = []
    for a in alts:
        items = list(a[1])
        bol = bool(items) and items[0] == ("bol",)
        eol = len(items) > bol and items[-1] == ("eol",)
        items = items[bol:len(items) - eol]
        _no_anchor(("cat", tuple(items)))
        head = [] if bol or not find else [anything]
        tail = [] if not find or (eol and not over) else [anything] if not eol else \
            [("alt", (("cat", ()), LINE_END, ("cat", (("c", ((13, 13),)), ("c", ((10, 10),))))))]
        out.append(("cat", tuple(head + items + tail)))
    return ("alt", tuple(out))


def like_ast(pattern, escape=None, over=True):
    """SQL LIKE -> AST. escape=None and a backslash: Spark reads it as an escape, DuckDB as a literal:
    over -> union of both readings; under -> unsupported."""
    readings = [escape] if escape is not None or "\\" not in pattern else ["\\", None]
    if len(readings) > 1 and not over:
        raise Unsupported("ambiguous backslash")
    out = []
    for e in readings:
        items, i = [], 0
        while i < len(pattern):
            ch = pattern[i]
            if e is not None and ch == e:
                if i + 1 == len(pattern):
                    raise Unsupported("dangling escape")
                items.append(("c", ((ord(pattern[i + 1]),) * 2,)))
                i += 2
                continue
            if ch == "%" and items and items[-1][0] == "rep":
                pass                                 # %% == %
            elif ch == "_" and items and items[-1][0] == "rep":
                items.insert(len(items) - 1, ("c", FULL))   # %_ == _%: keep one star at the end of a run
            else:
                items.append(("rep", ("c", FULL), 0, None) if ch == "%" else ("c", FULL) if ch == "_"
                             else ("c", ((ord(ch), ord(ch)),)))
            i += 1
        out.append(("cat", tuple(items)))
    return ("alt", tuple(out))


# ---------------------------------------------------------------- AST -> epsilon-free NFA (Thompson + closure)
class NFA:
    __slots__ = ("fin", "edges")

    def __init__(self, fin, edges):
        self.fin, self.edges = fin, edges            # state 0 = start; edges[s] = [(lo, hi, t)]


def to_nfa(ast, cap=2000, work_cap=20_000):
    eps, ch, work = [], [], [0]

    def st():
        if len(eps) >= cap:
            raise TooComplex("nfa size")
        eps.append([]), ch.append([])
        return len(eps) - 1

    def frag(x):
        k = x[0]
        s = st()
        if k == "c":
            e = st()
            ch[s].extend((lo, hi, e) for lo, hi in x[1])
            return s, e
        if k == "cat":
            cur = s
            for y in x[1]:
                a, b = frag(y)
                eps[cur].append(a)
                cur = b
            return s, cur
        if k == "alt":
            e = st()
            for y in x[1]:
                a, b = frag(y)
                eps[s].append(a), eps[b].append(e)
            return s, e
        _, y, lo, hi = x                             # rep
        cur = s
        for _ in range(lo):
            a, b = frag(y)
            eps[cur].append(a)
            cur = b
        if hi is None:
            a, b = frag(y)
            eps[cur].append(a), eps[b].append(cur)
            return s, cur
        e = st()
        for _ in range(hi - lo):
            a, b = frag(y)
            eps[cur].extend((a, e))
            cur = b
        eps[cur].append(e)
        return s, e

    start, end = frag(ast)
    closure = {}

    def clo(s):
        if s not in closure:
            seen, stack = {s}, [s]
            while stack:
                for t in eps[stack.pop()]:
                    if t not in seen:
                        seen.add(t), stack.append(t)
            closure[s] = seen
            work[0] += len(seen) + sum(len(ch[u]) for u in seen)
            if work[0] > work_cap:
                raise TooComplex("epsilon closure")
        return closure[s]

    index, order = {start: 0}, [start]
    fin, edges = [], []
    for s in order:                                  # order grows while we iterate
        cl = clo(s)
        fin.append(end in cl)
        out = set()
        for u in cl:
            for lo, hi, t in ch[u]:
                if t not in index:
                    index[t] = len(order)
                    order.append(t)
                out.add((lo, hi, index[t]))
        edges.append(sorted(out))
    return trim(NFA(fin, edges))


def trim(a):
    """Drop states that cannot reach an accepting state (keeps state 0)."""
    rev = [[] for _ in a.fin]
    for s, es in enumerate(a.edges):
        for _, _, t in es:
            rev[t].append(s)
    live = {s for s, f in enumerate(a.fin) if f}
    stack = list(live)
    while stack:
        for p in rev[stack.pop()]:
            if p not in live:
                live.add(p), stack.append(p)
    a.edges = [[e for e in es if e[2] in live] if s in live else [] for s, es in enumerate(a.edges)]
    return a


# ---------------------------------------------------------------- queries
def intersects(a, b, limit=30_000):
    """L(a) & L(b) non-empty?  DFS over state pairs: O(|a|*|b|) pairs, each edge pair tested once."""
    seen, stack, work = {(0, 0)}, [(0, 0)], 0
    while stack:
        s, p = stack.pop()
        if a.fin[s] and b.fin[p]:
            return True
        bes = b.edges[p]
        for lo, hi, t in a.edges[s]:
            work += len(bes)
            for lo2, hi2, u in bes:
                if lo <= hi2 and lo2 <= hi and (t, u) not in seen:
                    seen.add((t, u))
                    stack.append((t, u))
        if work > limit:
            raise TooComplex("product")
    return False


def included(a, b, limit=30_000):
    """L(a) subset of L(b)?  a: NFA, b: determinised on the fly. True/False, TooComplex above the cap."""
    start = (0, frozenset([0]))
    seen, stack, work = {start}, [start], 0
    while stack:
        s, ps = stack.pop()
        if a.fin[s] and not any(b.fin[p] for p in ps):
            return False
        bes = [e for p in ps for e in b.edges[p]]
        for lo, hi, t in a.edges[s]:
            cuts = sorted({lo, hi + 1} | {x for l2, h2, _ in bes for x in (l2, h2 + 1) if lo < x <= hi})
            work += len(bes) * len(cuts)
            if work > limit:
                raise TooComplex("inclusion")
            for x, y in zip(cuts, cuts[1:]):
                nxt = frozenset(u for l2, h2, u in bes if l2 <= x and y - 1 <= h2)
                if not nxt:
                    return False                     # a is trimmed: t reaches an accepting state
                if (t, nxt) not in seen:
                    seen.add((t, nxt))
                    stack.append((t, nxt))
    return True


def run(a, word):
    cur = {0}
    for ch in word:
        c = ord(ch)
        cur = {t for s in cur for lo, hi, t in a.edges[s] if lo <= c <= hi}
        if not cur:
            break
    return cur


class TagIndex:
    def __init__(self, regex):
        self.a = to_nfa(parse(regex, find=False), cap=100_000, work_cap=10**7)   # trusted, <= max_len chars

    def might_equal(self, x):
        return any(self.a.fin[s] for s in run(self.a, x))

    def might_in(self, xs):
        return any(self.might_equal(x) for x in xs)

    def might_start_with(self, p):
        return bool(run(self.a, p))                  # trimmed: any live state can still accept

    def only_values_in(self, xs):
        """Every string of the language is in xs: then `col NOT IN xs` / `col != x` match no row."""
        trie = {}
        for x in xs:
            node = trie
            for ch in x:
                node = node.setdefault(ord(ch), {})
            node[-1] = True
        seen, stack = set(), [(0, id(trie), trie)]
        while stack:
            s, _, node = stack.pop()
            if self.a.fin[s] and -1 not in node:
                return False
            for lo, hi, t in self.a.edges[s]:
                hits = [c for c in node if c >= 0 and lo <= c <= hi]
                if len(hits) < hi - lo + 1:
                    return False
                for c in hits:
                    if (t, id(node[c])) not in seen:
                        seen.add((t, id(node[c])))
                        stack.append((t, id(node[c]), node[c]))
        return True

    def _pattern(self, kind, pattern, escape=None, over=True):
        if len(pattern) > 1000:
            raise TooComplex("pattern length")
        return to_nfa(like_ast(pattern, escape, over) if kind == "like" else parse(pattern, True, over))

    def might_match(self, kind, pattern, escape=None):
        try:
            return intersects(self.a, self._pattern(kind, pattern, escape))
        except (Unsupported, TooComplex, RecursionError):
            return True

    def all_match(self, kind, pattern, escape=None):
        try:
            return included(self.a, self._pattern(kind, pattern, escape, over=False))
        except (Unsupported, TooComplex, RecursionError):
            return False
