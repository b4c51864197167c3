"""A benchmark's command line, made from its docstring: the first paragraph
says what it does, the rest (its usage and what each part measures) is
shown below the options as written."""

import argparse


def command_line(doc: str) -> argparse.ArgumentParser:
    summary, _, rest = doc.partition("\n\n")
    return argparse.ArgumentParser(description=summary, epilog=rest or None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
