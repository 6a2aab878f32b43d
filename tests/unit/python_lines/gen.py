# Writes line-table fixtures for test_python_lines.c from THIS interpreter:
#   code VERSION_HEX FIRSTLINENO TABLE_HEX NAME
#   q LASTI_BYTES LINE            (LINE -1 = no line)
# Expected lines come from CPython itself: co_lines() (3.10+) or
# dis.findlinestarts (<= 3.9).  Usage: python gen.py > VERSION.txt
import dis
import sys
import types

SRC = '''
def simple(a, b):
    c = a + b
    return c

def loops(n):
    total = 0
    for i in range(n):
        if i % 2:
            total += i
        else:
            total -= (i *
                      2 +
                      1)
    while total > 10:
        total //= 2
    return total

class K:
    def meth(self, x):
        try:
            return [y * 2 for y in x if y]
        except TypeError:
            return None
        finally:
            self.done = True
''' + "\n" * 300 + '''
def far_away(x):
    # a function 300 lines further: large line deltas
    y = x
''' + "\n" * 200 + '''
    return y + 1

def long_body(x):
''' + "".join("    x = x + %d\n" % i for i in range(400)) + '''
    return x
'''


def codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from codes(c)


def table(co):
    return co.co_linetable if sys.version_info >= (3, 10) else co.co_lnotab


def expected(co):
    n = len(co.co_code)
    if sys.version_info >= (3, 10):
        m = {}
        for start, end, line in co.co_lines():
            for off in range(start, end, 2):
                m[off] = -1 if line is None else line
        return [(off, m[off]) for off in range(0, n, 2) if off in m]
    starts = list(dis.findlinestarts(co))
    out = []
    for off in range(0, n, 2):
        line = co.co_firstlineno
        for s, l in starts:
            if s <= off:
                line = l
        out.append((off, line))
    return out


top = compile(SRC, "fixture.py", "exec")
print("# %s" % sys.version.split()[0])
for co in codes(top):
    print("code %#010x %d %s %s" % (sys.hexversion, co.co_firstlineno, table(co).hex() or "-", co.co_name))
    for off, line in expected(co):
        print("q %d %d" % (off, line))
