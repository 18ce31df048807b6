"""nbgrader configuration of the sat_tutorial course kit (nbgrader 0.9.6; see README.md)."""

import os, sys

from nbgrader.preprocessors import (
    CheckCellMetadata,
    ClearOutput,
    DeduplicateIds,
    OverwriteCells,
    OverwriteKernelspec,
)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from course import ForgetUnknownCells  # noqa: E402

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "sat_tutorial"
c.CourseDirectory.root = HERE  # nbgrader wants an absolute path
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")

# Seconds per cell when autograding. Every graded cell of A1–A7 runs in seconds on a 2-core CPU (A7's training is not
# run by the grader: it reads the run's JSON files). A cell that runs longer (an endless loop) is interrupted and its
# part scores 0; the rest of the notebook is still graded (nbgrader's Execute goes on after errors).
c.Execute.timeout = 120
# A graded cell that a student deleted scores 0 (it is not put back); one whose nbgrader metadata was renamed becomes an
# ordinary cell first (ForgetUnknownCells), so the renamed part scores 0 and the rest of the submission is graded.
c.OverwriteCells.add_missing_cells = False
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    ForgetUnknownCells,
    OverwriteCells,
    CheckCellMetadata,
]
