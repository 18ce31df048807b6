"""An endless loop at the top of a cell that ignores SIGINT and SIGALRM: the grader
kills the sandbox at the time limit and grades the rest."""

# loses: a1_attend_test
# says: per-cell time limit (30 s)
# %% a1_attend
import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
while True:
    pass
