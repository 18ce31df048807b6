__version__ = "0.1.0"

# The captioning API at the top level: `sat_tutorial.load_captioner(checkpoint)`
# (notebook 13_api). nbdev writes only the version line above and keeps the rest; the
# import waits for the first use so that `import sat_tutorial` stays light.
_API = {"load_captioner": "api", "ImageCaptioner": "api", "CaptionResult": "api"}


def __getattr__(name):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(f"sat_tutorial.{_API[name]}"), name)
    raise AttributeError(f"module 'sat_tutorial' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API))
