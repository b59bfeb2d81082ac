"""report.html's Quota leases section: one row per +lease configuration, over-admission shown
as the fault it is, and the +lease clients beside the plain ones in the Ratios."""

from __future__ import annotations

from html.parser import HTMLParser

from conftest import write_lease_results

from sluice_report import generate


class _Table(HTMLParser):
    """The body rows of the <table data-table=NAME>: per row, (text, class) of each cell."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.inside, self.body = name, False, False
        self.rows: list[list[tuple[str, str]]] = []
        self.cell: list[str] | None = None
        self.cls = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("data-table") == self.name:
            self.inside = True
        elif self.inside and tag == "tbody":
            self.body = True
        elif self.body and tag == "tr":
            self.rows.append([])
        elif self.body and tag == "td":
            self.cell, self.cls = [], a.get("class") or ""

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.rows[-1].append(("".join(self.cell).strip(), self.cls))
            self.cell = None
        elif tag == "table" and self.inside:
            self.inside = self.body = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def table(html: str, name: str) -> list[list[tuple[str, str]]]:
    parser = _Table(name)
    parser.feed(html)
    return parser.rows


def _texts(row):
    return [text for text, _ in row]


def test_one_row_per_lease_configuration(lease_report):
    _, html_path, _ = lease_report
    html = html_path.read_text(encoding="utf-8")
    assert '<a href="#leases">Quota leases</a>' in html and '<h2 id="leases">' in html
    rows = table(html, "leases")
    assert [tuple(_texts(r)[:3]) for r in rows] == [
        ("valkey-glide+lease", "standalone", "light"),
        ("iovalkey+lease", "standalone", "light"),
        ("iovalkey+lease", "standalone", "flood"),
        ("iovalkey+lease", "cluster", "light"),
    ]
    # implementation, mode, workload, conn., ok/runs, req/s, x quotas off, x peer, its trips,
    # the plain client's trips, over-admitted, unspent share, status.
    assert _texts(rows[1]) == ["iovalkey+lease", "standalone", "light", "50", "3/3", "4,408",
                               "0.95", "1.76", "0.05", "1.00", "0", "2.0%", "ok"]
    assert _texts(rows[2])[8:10] == ["0.02", "0.10"]  # flood: against iovalkey's flood trips
    assert rows[1][10] == ("0", "good")


def test_over_admission_is_marked_in_the_table(tmp_path):
    d = write_lease_results(tmp_path / "s", {("iovalkey+lease", "cluster", "light", 1): 1234})
    _, html_path, _ = generate(d)
    rows = table(html_path.read_text(encoding="utf-8"), "leases")
    cluster = next(r for r in rows if _texts(r)[:2] == ["iovalkey+lease", "cluster"])
    assert cluster[10] == ("1,234 ⚠", "bad")
    # The runs without over-admission stay 0.
    assert all(r[10] == ("0", "good") for r in rows if r is not cluster)


def test_lease_clients_are_in_the_ratios_beside_the_plain_ones(lease_report):
    report, html_path, _ = lease_report
    labels = [r.label for r in report.headline.http_vs_peer]
    # By connections, topology, then the report's order: each +lease client after the plain ones.
    assert labels == ["valkey-glide standalone", "iovalkey standalone",
                      "valkey-glide+lease standalone", "iovalkey+lease standalone",
                      "iovalkey cluster", "iovalkey+lease cluster"]
    rows = {_texts(r)[1]: _texts(r) for r in table(html_path.read_text(encoding="utf-8"),
                                                    "ratios-http")}
    # x peer and x quotas off per round: every round has the same jitter, so min = max = mean.
    assert rows["iovalkey+lease standalone"][2] == "1.76"
    assert rows["iovalkey+lease standalone"][5] == "0.95"
    assert rows["iovalkey standalone"][2] == "1.59"


def test_no_lease_section_without_lease_runs(built_report):
    _, html_path, _ = built_report
    html = html_path.read_text(encoding="utf-8")
    assert 'id="leases"' not in html and 'href="#leases"' not in html
