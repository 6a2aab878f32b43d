#!/usr/bin/env python3
"""Write compile_commands.json for clangd and clang-tidy from the Makefile's
own variables (passed in the environment by `make compile_commands.json`),
so the database cannot drift from the real build."""
import json, os, shlex, sys

def entries(cc, flags, srcs, extra=()):
    for s in srcs.split():
        yield {"directory": os.getcwd(), "file": s,
               "arguments": [cc, *shlex.split(flags), *extra, "-c", s]}

db = [*entries(os.environ["CC"], os.environ["FLAGS"], os.environ["SRCS"]),
      *entries(os.environ["CC"], os.environ["AFLAGS"], os.environ["ASRCS"], ["-shared"]),
      *entries(os.environ["CLANG"], os.environ["BFLAGS"], os.environ["BSRCS"])]
json.dump(db, sys.stdout, indent=1)
sys.stdout.write("\n")
