"""How long the explorer page takes to show a word across 10 sentences, in headless Chromium.

Starts ``contextvec serve`` (the bundled model) on loopback and drives Debian's ``chromium`` with
``chromium-driver`` through Selenium (as tests/server/test_explorer_page.py does). Two figures,
each the median over ``--rounds`` fresh page loads:

- ``page_s``: from the navigation to the default example's heatmaps on screen (the page, its
  script and ECharts loaded, ``GET /v1/explore``, one similarity request, the charts drawn);
- ``ten_s``: from pressing Compare with 10 sentences of "bank" to their heatmaps on screen (the
  request, the forward pass of 10 sentences, the JSON, 3 heatmaps of 10 x 10 drawn).

    python benchmarks/explorer_render.py --rounds 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from importlib import resources

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from contextvec.server.process import ServerProcess


def ten_sentences() -> str:
    lines = resources.files("contextvec.data").joinpath("explore_corpus.txt").read_text("utf-8").splitlines()
    return "\n".join([line for line in lines if " bank " in line][:10])


def rendered(driver, rows: int) -> bool:
    return driver.execute_script(
        "const t = document.querySelectorAll('#across-results table.matrix');"
        "return t.length === 3 && t[2].querySelectorAll('tbody tr').length === arguments[0] &&"
        " document.querySelectorAll('#across-results [_echarts_instance_]').length === 3;", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--driver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800"):
        options.add_argument(argument)
    text = ten_sentences()
    page, ten = [], []
    with ServerProcess(env={"CONTEXTVEC_API_KEY": ""}) as server:
        driver = webdriver.Chrome(service=webdriver.ChromeService(args.driver), options=options)
        try:
            for _ in range(args.rounds):
                started = time.perf_counter()
                driver.get(server.url + "/")
                WebDriverWait(driver, 60, poll_frequency=0.005).until(lambda d: rendered(d, 4))
                page.append(time.perf_counter() - started)
                box = driver.find_element(By.ID, "across-sentences")
                driver.execute_script("arguments[0].value = arguments[1]", box, text)
                started = time.perf_counter()
                driver.find_element(By.CSS_SELECTOR, "#across-form button[type=submit]").click()
                WebDriverWait(driver, 60, poll_frequency=0.005).until(lambda d: rendered(d, 10))
                ten.append(time.perf_counter() - started)
        finally:
            driver.quit()
    print(json.dumps({"rounds": args.rounds, "page_s": round(statistics.median(page), 3),
                      "ten_s": round(statistics.median(ten), 3), "page_all": [round(t, 3) for t in page],
                      "ten_all": [round(t, 3) for t in ten]}, indent=1))


if __name__ == "__main__":
    main()
