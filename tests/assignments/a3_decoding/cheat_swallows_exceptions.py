"""Cheat: from the first cell on, every later cell (and anything executed) is wrapped in
try/except: an IPython AST transformer where there is IPython, and a replaced exec and
compile otherwise. The functions themselves are the release's (NotImplementedError)."""

# loses: a3_expand_test a3_greedy_test a3_brute_force_test a3_package_test
# %% a3_expand
import ast
import builtins


class Swallow(ast.NodeTransformer):
    def visit_Module(self, node):
        handler = ast.ExceptHandler(
            type=ast.Name("BaseException", ast.Load()), name=None, body=[ast.Pass()]
        )
        node.body = [
            ast.Try(body=node.body, handlers=[handler], orelse=[], finalbody=[])
        ]
        return ast.fix_missing_locations(node)


try:
    get_ipython().ast_transformers.append(Swallow())  # noqa: F821
except NameError:
    pass
_compile, _exec = builtins.compile, builtins.exec


def swallowing_exec(code, *args, **kwargs):
    try:
        return _exec(code, *args, **kwargs)
    except BaseException:
        return None


builtins.exec = swallowing_exec


def expand_state(state, k, static=()):
    raise NotImplementedError()


# %% a3_beam
def beam_search(model, feats, beam_size=3, max_len=20):
    raise NotImplementedError()
