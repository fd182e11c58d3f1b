"""A sitemap as a user drives it: `ragbus sitemaps add`, `poll`, a changed <lastmod>, a removed page."""

from __future__ import annotations

from tests.support import (
    Site,
    article_html,
    cli_json,
    documents_by_name,
    run_cli,
    serve_site,
    topic_paragraphs,
)

TOPICS = ["volcano", "saxophone", "glacier"]
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def _sitemap(site: Site, lastmods: dict[str, str]) -> None:
    urls = "".join(f"<url><loc>{site.base}/pages/{t}.html</loc><lastmod>{d}</lastmod></url>"
                   for t, d in lastmods.items())
    site.put("/sitemap.xml", f"<?xml version='1.0' encoding='UTF-8'?><urlset xmlns='{NS}'>{urls}</urlset>",
             "application/xml")


def _index(site: Site) -> None:
    site.put("/sitemap_index.xml", f"<?xml version='1.0'?><sitemapindex xmlns='{NS}'>"
             f"<sitemap><loc>{site.base}/sitemap.xml</loc></sitemap></sitemapindex>", "application/xml")


def test_sitemap_index_poll_change_by_lastmod_and_removal(tmp_path):
    home = tmp_path / "home"
    with serve_site(Site()) as site:
        for n, topic in enumerate(TOPICS):
            site.put(f"/pages/{topic}.html", article_html(f"All about {topic}", topic_paragraphs(topic, seed=n)))
        lastmods = {t: "2026-10-01" for t in TOPICS}
        _sitemap(site, lastmods)
        _index(site)
        index = f"{site.base}/sitemap_index.xml"

        refused = run_cli(home, "sitemaps", "add", index, check=False, RAGBUS_ALLOW_LOOPBACK="0")
        assert refused.returncode != 0 and "loopback" in (refused.stderr + refused.stdout).lower()
        run_cli(home, "sitemaps", "add", index)
        assert [s["url"] for s in cli_json(home, "sitemaps", "list")] == [index]
        assert cli_json(home, "feeds", "list") == []

        run_cli(home, "poll")
        first = documents_by_name(home)
        assert set(first) == {f"{t}.html" for t in TOPICS}
        assert first["volcano.html"]["title"] == "All about volcano"  # the page's own title
        hits = cli_json(home, "search", "saxophone report", "--k", "3")
        assert hits[0]["url"].endswith("/pages/saxophone.html")

        # unchanged <lastmod>: no page is fetched again
        page_hits = site.hits["/pages/volcano.html"]
        run_cli(home, "poll")
        assert site.hits["/pages/volcano.html"] == page_hits and documents_by_name(home) == first

        # a new <lastmod> re-fetches that page only; a page gone from the sitemap is removed
        site.put("/pages/glacier.html", article_html("Glaciers, revised", topic_paragraphs("iceberg", seed=9)))
        _sitemap(site, {"volcano": "2026-10-01", "glacier": "2026-11-02"})
        run_cli(home, "poll")
        after = documents_by_name(home)
        assert set(after) == {"volcano.html", "glacier.html"}
        assert after["glacier.html"]["content_hash"] != first["glacier.html"]["content_hash"]
        assert after["volcano.html"] == first["volcano.html"]
        assert site.hits["/pages/volcano.html"] == page_hits

        # bad input: a broken sitemap is a recorded error and nothing indexed is lost
        site.put("/sitemap.xml", "<?xml version='1.0'?><urlset><url><loc>trunc", "application/xml")
        result = run_cli(home, "poll", check=False)
        assert result.returncode == 1
        (recorded,) = cli_json(home, "sitemaps", "list")
        assert "malformed XML" in recorded["last_error"]
        assert documents_by_name(home) == after

        run_cli(home, "sitemaps", "remove", index)
        assert documents_by_name(home) == {} and cli_json(home, "sitemaps", "list") == []
