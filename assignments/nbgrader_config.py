"""nbgrader configuration of the sat_tutorial course kit (nbgrader 0.9.6; README.md).

nbgrader releases the assignments (solution regions removed) and gives students the
Validate button; grading is `python assignments/course.py grade` (a sandbox per
submission, checks outside the student's process), so `nbgrader autograde` is refused.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from course import refuse_autograde  # noqa: E402

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "sat_tutorial"
c.CourseDirectory.root = HERE  # nbgrader wants an absolute path
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")
# checks.json holds the grader's probes: it never goes into release/
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "checks.json"]
c.Autograde.sanitize_preprocessors = [refuse_autograde()]
