"""report.html in a real headless Chromium: no script errors, every chart drawn with data.

A copy of the report gets two probes: one at the very start of <head> that records window
errors and console.error calls (before plotly.js runs), one at the end of <body> that, after
load, waits until every plotly graph has drawn (or a deadline passes), inspects them and
writes a JSON verdict into <pre id="selfcheck">. Chromium's --dump-dom prints the DOM after
the virtual-time budget, verdict included.
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# --disable-dev-shm-usage: a container's small /dev/shm would crash the renderer on this
# 4 MiB page when other browsers share it.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]
# Virtual milliseconds: how long the probe waits after load for every chart to be drawn,
# and the budget Chromium gives the page (past that deadline, so the verdict is written).
DRAW_DEADLINE_MS = 20000
VIRTUAL_TIME_BUDGET_MS = 30000

HEAD_PROBE = """<script>
window.__errors = [];
window.addEventListener('error', function (e) {
  window.__errors.push('error: ' + (e.message || (e.target && (e.target.src || e.target.href)) || String(e)));
}, true);
window.addEventListener('unhandledrejection', function (e) { window.__errors.push('rejection: ' + e.reason); });
(function () {
  var orig = console.error;
  console.error = function () {
    window.__errors.push('console.error: ' + Array.prototype.map.call(arguments, String).join(' '));
    return orig.apply(console, arguments);
  };
})();
</script>"""

BODY_PROBE = """<script>
window.addEventListener('load', function () {
  var waited = 0;
  function marksOf(gd) {
    return gd.querySelectorAll('.bars path, .scatterlayer path.js-line').length;
  }
  function drawn() {
    var gds = document.querySelectorAll('.js-plotly-plot');
    var count = document.getElementById('chart-count');
    var stated = count ? Number(count.dataset.charts) : 1;
    return gds.length >= stated && Array.prototype.every.call(gds, function (gd) {
      return gd.querySelectorAll('svg.main-svg').length > 0 && marksOf(gd) > 0;
    });
  }
  // Wait for the state the test asserts, not a fixed delay: every chart drawn, or the deadline.
  (function verdictWhenDrawn() {
    if (!drawn() && waited < DRAW_DEADLINE_MS) {
      waited += 100;
      setTimeout(verdictWhenDrawn, 100);
      return;
    }
    function finite(v) { return typeof v === 'number' && isFinite(v); }
    function points(a) {
      if (!a || typeof a.length !== 'number') return 0;
      var n = 0;
      for (var i = 0; i < a.length; i++) {
        var v = a[i];
        if (Array.isArray(v)) n += points(v);
        else if (finite(v) || (typeof v === 'string' && v !== '')) n++;
      }
      return n;
    }
    var plots = Array.prototype.map.call(document.querySelectorAll('.js-plotly-plot'), function (gd) {
      var traces = (gd.data || []).map(function (t) {
        var ys = (t.y || t.values || []), xs = (t.x || t.labels || []);
        var numeric = 0;
        for (var i = 0; i < ys.length; i++) if (finite(ys[i])) numeric++;
        return {type: t.type, name: t.name, x: points(xs), numericY: numeric};
      });
      return {id: gd.id, traces: traces.length,
              withData: traces.filter(function (t) { return t.x > 0 && t.numericY > 0; }).length,
              svg: gd.querySelectorAll('svg.main-svg').length,
              marks: marksOf(gd)};
    });
    var count = document.getElementById('chart-count');
    var pre = document.createElement('pre');
    pre.id = 'selfcheck';
    pre.textContent = JSON.stringify({
      stated: count ? Number(count.dataset.charts) : -1,
      sections: document.querySelectorAll('section.chart').length,
      plots: plots,
      errors: window.__errors,
      waitedMs: waited
    });
    document.body.appendChild(pre);
  })();
});
</script>""".replace("DRAW_DEADLINE_MS", str(DRAW_DEADLINE_MS))


def _chromium() -> str:
    path = Path(CHROMIUM)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"headless Chromium not found at {CHROMIUM}: the report's browser test needs "
                    f"it. Install it with `apt-get install -y chromium` or set CHROMIUM=/path.",
                    pytrace=False)
    return str(path)


def _probe(html: str) -> str:
    head = re.search(r"<head[^>]*>", html)
    assert head, "report.html has no <head>"
    html = html[:head.end()] + HEAD_PROBE + html[head.end():]
    end = html.rfind("</body>")
    assert end > 0, "report.html has no </body>"
    return html[:end] + BODY_PROBE + html[end:]


def test_report_has_no_network_references(built_report):
    _, html_path, _ = built_report
    html = html_path.read_text(encoding="utf-8")
    remote = re.findall(r"<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)\s*=\s*[\"']?"
                        r"\s*(?:https?:)?//[^\s\"'>]*", html, re.IGNORECASE)
    assert remote == []
    # plotly.js is embedded, exactly once.
    from plotly.offline import get_plotlyjs
    js = get_plotlyjs()
    assert html.count(js[:400]) == 1 and html.count(js[-400:]) == 1


@pytest.mark.timeout(240)
def test_report_renders_in_chromium(built_report, tmp_path):
    chromium = _chromium()
    report, html_path, _ = built_report
    probed = tmp_path / "report-probed.html"
    probed.write_text(_probe(html_path.read_text(encoding="utf-8")), encoding="utf-8")
    profile = tmp_path / "profile"
    profile.mkdir()
    proc = subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}",
         f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=180)
    m = re.search(r'<pre id="selfcheck">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert m, (f"no self-check verdict in the DOM (chromium exit {proc.returncode}); "
               f"stderr tail: {proc.stderr[-2000:]}")
    verdict = json.loads(htmllib.unescape(m.group(1)))

    assert verdict["errors"] == []
    drawn = len(report.charts.charts)
    assert drawn >= 8
    assert verdict["stated"] == drawn == verdict["sections"]
    assert len(verdict["plots"]) == drawn, verdict["plots"]
    for plot in verdict["plots"]:
        assert plot["svg"] > 0, plot
        assert plot["withData"] >= 1, f"chart {plot['id']} has no trace with data: {plot}"
        assert plot["marks"] >= 1, f"chart {plot['id']} drew nothing: {plot}"
    assert {p["id"] for p in verdict["plots"]} == {c.id for c in report.charts.charts}
