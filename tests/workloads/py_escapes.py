# A hostile job: its code objects carry terminal escape sequences in their
# names and file name (OSC title set, SGR colour, a C1 CSI, a bidi override).
# tests/integration/t_safe_escapes.sh profiles it and reads the report.
import sys
import time

EVIL = "evil\x1b]0;pwned\x07\x1b[31mred\u009b2J\u202egnp.exe"
SRC = """
def burn(deadline):
    x = 0
    while time.time() < deadline:
        for i in range(10000):
            x += i * i
    return x
"""
ns = {"time": time}
exec(compile(SRC, EVIL + ".py", "exec"), ns)
burn = ns["burn"]
kw = {"co_name": EVIL}
if sys.version_info >= (3, 11):
    kw["co_qualname"] = EVIL
burn.__code__ = burn.__code__.replace(**kw)
burn(time.time() + float(sys.argv[1] if len(sys.argv) > 1 else 2))
