import sys

from .main import main

sys.exit(main(prog="python -m minilog.broker"))
