# The C module behind `signal` (the job supervisor and the spawn server import it
# directly: importing `signal` costs ~5 ms, its enums). Its names are signal's.
from signal import *  # noqa: F403
