# nbdev 2 template setup.py, minus the pkg_resources import that current setuptools no
# longer has.
from configparser import ConfigParser
import setuptools

config = ConfigParser(delimiters=["="])
config.read("settings.ini", encoding="utf-8")
cfg = config["DEFAULT"]

requirements = cfg.get("requirements", "").split()
dev_requirements = cfg.get("dev_requirements", "").split()
lite_requirements = cfg.get("lite_requirements", "").split()
docs_requirements = cfg.get("docs_requirements", "").split()
course_requirements = cfg.get("course_requirements", "").split()
setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    author=cfg["author"],
    author_email=cfg["author_email"],
    url=cfg["git_url"],
    keywords=cfg["keywords"].split(),
    packages=setuptools.find_packages(include=["sat_tutorial", "sat_tutorial.*"]),
    include_package_data=True,
    package_data={"sat_tutorial": ["zoo/*.pt", "zoo/manifest.json"]},  # the model zoo
    install_requires=requirements,
    extras_require={
        "dev": dev_requirements,
        "lite": lite_requirements,
        "docs": docs_requirements,
        "course": course_requirements,
    },
    python_requires=">=" + cfg["min_python"],
    zip_safe=False,
    entry_points={
        "console_scripts": cfg.get("console_scripts", "").split(),
        "nbdev": [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"],
    },
)
