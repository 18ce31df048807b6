"""Open every page of the built book in headless Chromium and fail unless each page is
whole and offline.

    python docs/check.py [--site _docs] [--install-browser]

On every page: each image loaded (naturalWidth > 0), each equation typeset by MathJax
(an mjx-container inside every .math element, and no raw `$$`, `\\command` or `$x_` TeX
left in the text outside code), no console error or uncaught exception, no file the page
loads missing, and no request for anything but local files. Search is checked once:
search.html?q=attention must list results. One full-page screenshot per notebook goes to
<site>/_screens/.

The browser is Debian's `chromium` (or $CHROMIUM), driven by Playwright for Python;
Playwright's own browser download is not needed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ("file:", "data:", "blob:", "about:")

# Runs in the page after load: waits for images and MathJax, then reports what is
# broken.
INSPECT = r"""async () => {
  const imgs = [...document.images];
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const maths = [...document.querySelectorAll('.math')];
  // The text a reader sees outside code and typeset math: TeX left in it means a formula the parser missed.
  const prose = document.body.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, textarea, mjx-container, .math').forEach(e => e.remove());
  const raw = [];
  for (const m of prose.textContent.matchAll(/\$\$|\\[A-Za-z]{2,}|\$(?![A-Z][A-Z0-9_]*\b)[^$\s]*[\\^_{]/g))
    raw.push(prose.textContent.slice(Math.max(0, m.index - 40), m.index + 40).replace(/\s+/g, ' '));
  return {
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    maths: maths.length,
    display: document.querySelectorAll('mjx-container[display="true"]').length,
    untypeset: maths.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.trim().slice(0, 60)),
    raw_tex: raw,
    // MathJax also typesets delimiters it finds in plain text: math the Markdown parser did not mark is garbled
    stray: [...document.querySelectorAll('mjx-container')].filter(c => !c.closest('.math'))
             .map(c => (c.parentElement.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 80)),
    styled: getComputedStyle(document.body).fontFamily,
    mathjax: !!window.MathJax,
  };
}"""


def find_chromium() -> str | None:
    for name in [
        os.environ.get("CHROMIUM"),
        "chromium",
        "chromium-browser",
        "google-chrome",
    ]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def install_chromium() -> None:
    """apt-get install chromium where that is possible (root, or password-less sudo);
    otherwise say how."""
    if not shutil.which("apt-get"):
        return
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if prefix and (
        not shutil.which("sudo")
        or subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode
    ):
        return
    print("docs/check.py: installing Debian's chromium with apt-get", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(prefix + ["apt-get", "update", "-q"], env=env)
    subprocess.run(prefix + ["apt-get", "install", "-y", "-q", "chromium"], env=env)


def pages_of(site: Path) -> list[Path]:
    skip = ("_static", "_screens", "_sources", "_images")
    return sorted(
        p for p in site.rglob("*.html") if not p.relative_to(site).parts[0] in skip
    )


def check_page(context, url: str) -> tuple[dict, list[str], object]:
    """Open one page; return the page's report, its problems, and the open page (for a
    screenshot)."""
    problems: list[str] = []
    page = context.new_page()
    page.on(
        "console",
        lambda m: (
            m.type == "error" and problems.append(f"console error: {m.text[:200]}")
        ),
    )
    page.on(
        "pageerror", lambda e: problems.append(f"uncaught exception: {str(e)[:200]}")
    )
    page.on(
        "request",
        lambda r: (
            r.url.startswith(LOCAL)
            or problems.append(f"request leaves the machine: {r.url}")
        ),
    )
    page.on(
        "requestfailed",
        lambda r: (
            r.url.startswith(LOCAL)
            and problems.append(f"failed to load {r.url} ({r.failure})")
        ),
    )
    page.goto(url, wait_until="load")
    info = page.evaluate(INSPECT)
    page.wait_for_timeout(100)  # let late console messages arrive
    problems += [f"broken image: {s}" for s in info["broken"]]
    problems += [f"equation not typeset: {t}" for t in info["untypeset"]]
    problems += [f"raw TeX in text: ...{t}..." for t in info["raw_tex"]]
    problems += [
        f"math typeset outside any formula the parser marked: {t}"
        for t in info["stray"]
    ]
    if info["maths"] and not info["mathjax"]:
        problems.append("page has math but MathJax did not load")
    return info, problems, page


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--site",
        type=Path,
        default=ROOT / "_docs",
        help="the built site (default: _docs)",
    )
    ap.add_argument(
        "--install-browser",
        action="store_true",
        help="apt-get install chromium if it is missing",
    )
    ap.add_argument(
        "--timeout", type=float, default=60, help="seconds allowed per page"
    )
    args = ap.parse_args(argv)
    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(
            f"docs/check.py: no built site at {site}/index.html: run `make docs` first",
            file=sys.stderr,
        )
        return 1
    chromium = find_chromium()
    if chromium is None and args.install_browser:
        install_chromium()
        chromium = find_chromium()
    if chromium is None:
        print(
            "docs/check.py: Chromium not found: install Debian's package (`sudo "
            "apt-get install chromium`) "
            "or set CHROMIUM=/path/to/chromium",
            file=sys.stderr,
        )
        return 1
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print(
            "docs/check.py: playwright is not installed: pip install -e '.[docs]' "
            "(make docs does it)",
            file=sys.stderr,
        )
        return 1

    screens = site / "_screens"
    shutil.rmtree(screens, ignore_errors=True)
    screens.mkdir()
    t0, failed, totals = (
        time.perf_counter(),
        0,
        dict(pages=0, images=0, display=0, maths=0, screens=0),
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(args.timeout * 1000)
        # Anything not local is refused before it leaves (and counted as a failure by
        # check_page).
        context.route(
            lambda url: not url.startswith(LOCAL),
            lambda route: route.abort("blockedbyclient"),
        )
        for path in pages_of(site):
            rel = path.relative_to(site)
            info, problems, page = check_page(context, path.as_uri())
            if rel.parts[0] == "nbs":
                page.screenshot(path=str(screens / f"{path.stem}.png"), full_page=True)
                totals["screens"] += 1
            page.close()
            totals["pages"] += 1
            for k in ("images", "display", "maths"):
                totals[k] += info[k]
            status = "FAIL" if problems else "ok"
            print(
                f"{status:4} {rel}: {info['images']} images, {info['maths']} equations "
                f"({info['display']} display) typeset"
            )
            for msg in problems:
                print(f"     {msg}")
            failed += bool(problems)
        # Offline search: the search page must find the word every notebook uses.
        _, problems, page = check_page(
            context, (site / "search.html").as_uri() + "?q=attention"
        )
        try:
            page.wait_for_selector("#search-results li", timeout=args.timeout * 1000)
            hits = page.locator("#search-results li").count()
        except Exception:
            hits = 0
        page.close()
        if not hits:
            problems.append("search for 'attention' listed no results")
        print(
            f"{'FAIL' if problems else 'ok':4} search.html?q=attention: {hits} results"
        )
        for msg in problems:
            print(f"     {msg}")
        failed += bool(problems)
        browser.close()
    print(
        f"docs/check.py: {totals['pages']} pages, {totals['images']} images, "
        f"{totals['maths']} equations "
        f"({totals['display']} display), {totals['screens']} screenshots in {screens}, "
        f"{failed} failing, {time.perf_counter() - t0:.0f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
