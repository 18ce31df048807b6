"""nbgrader configuration of the sat_tutorial course kit (nbgrader 0.9.6; README.md).

nbgrader releases the assignments (solution regions removed) and gives students the
Validate button; grading is `python assignments/course.py grade` (a sandbox per
submission, checks outside the student's process), so `nbgrader autograde` is refused.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

REFUSED = (
    "nbgrader autograde is refused: this course is graded by `python "
    "assignments/course.py grade` (in a sandbox, with checks the notebooks do not "
    "hold); nothing was changed"
)


def _loaded_by_autograde() -> bool:
    "Whether the app loading this file is `nbgrader autograde` (AutogradeApp)."
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if any(k.__name__ == "AutogradeApp" for k in type(owner).__mro__):
            return True
        frame = frame.f_back
    return False


if _loaded_by_autograde():
    # before nbgrader opens (and creates) gradebook.db or autograded/: a refused
    # command changes nothing. (The preprocessor below still refuses autograde when
    # it runs through nbgrader's Python API, which does not read this file then.)
    print(REFUSED, file=sys.stderr)
    sys.exit(2)

sys.path.insert(0, HERE)
from course import refuse_autograde  # noqa: E402

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "sat_tutorial"
c.CourseDirectory.root = HERE  # nbgrader wants an absolute path
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")
# checks.json holds the grader's probes: it never goes into release/
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "checks.json"]
c.Autograde.sanitize_preprocessors = [refuse_autograde()]
