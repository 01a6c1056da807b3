"""The explorer page in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by Selenium, against a real ``contextvec serve`` on loopback.

Every view renders with the bundled models' numbers (compared here with ``Encoder.embed``), a bad
input shows a message, and the browser logs no error. With ``CONTEXTVEC_SCREENSHOTS=DIR`` the
tests save their screenshots there (the docs' figures come from ``docs/figures``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi", reason="the server extra is not installed: pip install -e '.[server]'")
webdriver = pytest.importorskip("selenium.webdriver", reason="the test extra is not installed")
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if CHROMIUM is None or DRIVER is None:
    pytest.skip("needs Chromium and its driver: apt-get install chromium chromium-driver",
                allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

import contextvec  # noqa: E402
from contextvec.explore.contexts import read_marked, sense_separation, word_across_contexts  # noqa: E402
from contextvec.server.explore import read_explore_corpus  # noqa: E402
from contextvec.server.process import ServerProcess  # noqa: E402

SECOND = "cove-en-multi30k"
SHOTS = os.environ.get("CONTEXTVEC_SCREENSHOTS")
DECIMALS = 5e-4  # the page shows 3 decimals
PROBE = Path(__file__).resolve().parent / "data" / "probe-pos-elmo-en-small.json"
"""A real probe report of the bundled model (data/README.md says how it was made)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("page")
    env = {"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": "", "CONTEXTVEC_CACHE": str(root / "cache")}
    with ServerProcess(["--threads", "1", "--explore-model", SECOND, "--explore-report",
                        os.path.relpath(PROBE)], env=env) as process:
        yield process.url


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                     "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def page(server, browser):
    """The page, loaded afresh; after the test, the browser must have logged no error."""
    browser.set_window_size(1280, 800)
    browser.get(server + "/")
    yield browser
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


@pytest.fixture(scope="module")
def encoders():
    torch.set_num_threads(1)
    return {"elmo-en-small": contextvec.load(), SECOND: contextvec.load(SECOND)}


def wait_for(driver, css: str, timeout: float = 30.0) -> list:
    return WebDriverWait(driver, timeout).until(lambda d: d.find_elements(By.CSS_SELECTOR, css))


def shot(driver, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"explorer-{name}.png"))


def numbers(table) -> np.ndarray:
    """A table's numeric cells (its body's td), row by row."""
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    return np.array([[float(td.get_attribute("textContent")) for td in row.find_elements(By.TAG_NAME, "td")]
                     for row in rows])


def message(driver) -> str:
    box = driver.find_element(By.ID, "message")
    WebDriverWait(driver, 30).until(lambda d: box.is_displayed())
    return box.text


def typed(driver) -> tuple[list[list[str]], list[str | None]]:
    """The sentences in the word-across-contexts view's text box, and their sense marks."""
    text = driver.find_element(By.ID, "across-sentences").get_attribute("value")
    texts, senses = read_marked(text.splitlines())
    return [t.split() for t in texts], senses


def charts(driver, within: str) -> list:
    """The charts (ECharts instances) drawn in ``within``."""
    return driver.find_elements(By.CSS_SELECTOR, f"{within} [_echarts_instance_]")


def occurrences_cosines(encoder, sentences: list[list[str]], word: str) -> np.ndarray:
    arrays = encoder.embed(sentences)
    found = [(i, j) for i, s in enumerate(sentences) for j, t in enumerate(s) if t == word]
    vectors = np.stack([arrays[i][:, j] for i, j in found], axis=1)
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    return unit @ unit.transpose(0, 2, 1)


def test_a_word_across_contexts_shows_each_layers_similarities(page, encoders):
    started = time.perf_counter()
    tables = wait_for(page, "#across-results table.matrix")
    first_render = time.perf_counter() - started
    assert len(charts(page, "#across-results")) == 3  # a heatmap per layer
    sentences, senses = typed(page)
    expected = occurrences_cosines(encoders["elmo-en-small"], sentences, "play")
    shown = np.stack([numbers(t) for t in tables])
    np.testing.assert_allclose(shown, expected, atol=DECIMALS)
    # the words above the charts are the endpoint's, read off these numbers: per layer the same-sense
    # against the different-sense mean, and the layer that separates the senses best by its margin
    layers = encoders["elmo-en-small"].embed(sentences)
    separation = sense_separation(word_across_contexts(layers, sentences, "play"), senses,
                                  encoders["elmo-en-small"].layer_names())
    rows = page.find_elements(By.CSS_SELECTOR, "table.separation tbody tr")
    cells = [[c.get_attribute("textContent") for c in row.find_elements(By.CSS_SELECTOR, "th, td")]
             for row in rows]
    assert [c[0] for c in cells] == ["0 char-CNN", "1 biLSTM-1", "2 biLSTM-2"]
    np.testing.assert_allclose([[float(x) for x in c[1:4]] for c in cells],
                               [[s.same, s.different, s.margin] for s in separation.layers], atol=DECIMALS)
    verdicts = [li.text for li in page.find_elements(By.CSS_SELECTOR, "#across-results ul.verdicts li")]
    assert [v.split(": ")[2].split(" (")[0] for v in verdicts] == [s.verdict().split(": ")[1].split(" (")[0]
                                                                  for s in separation.layers]
    summary = page.find_element(By.CSS_SELECTOR, "#across-results p.summary").text
    best = separation.layers[separation.best]
    prefix = f"{best.name.split()[1]} separates the senses best, by a margin of "
    assert summary.startswith(prefix)
    assert float(summary[len(prefix):].split()[0]) == pytest.approx(best.margin, abs=DECIMALS)
    hint = page.find_element(By.CSS_SELECTOR, "#view-across p.hint").text
    assert "tell the senses apart" not in hint and "[river]" in hint
    top = page.find_elements(By.CSS_SELECTOR, "table.pairs tbody tr")[-1]
    layer, closest, farthest = (c.text for c in top.find_elements(By.CSS_SELECTOR, "th, td"))
    upper = expected[2][np.triu_indices(len(expected[2]), k=1)]
    assert layer == "2 biLSTM-2"
    assert float(closest.rsplit(": ", 1)[1]) == pytest.approx(upper.max(), abs=DECIMALS)
    assert float(farthest.rsplit(": ", 1)[1]) == pytest.approx(upper.min(), abs=DECIMALS)
    shot(page, "across")
    print(f"first render of the word-across-contexts view: {first_render:.2f} s")


def test_bad_input_shows_a_message(page):
    wait_for(page, "#across-results table.matrix")
    word = page.find_element(By.ID, "across-word")
    word.clear()
    word.send_keys("theatre", Keys.ENTER)
    assert "occurs once" in message(page)
    box = page.find_element(By.ID, "across-sentences")
    box.send_keys(Keys.END, "\nA play without a sense mark .")
    word.clear()
    word.send_keys("play", Keys.ENTER)
    assert "Mark the sense of every sentence" in message(page)
    word.clear()
    word.send_keys("the bank", Keys.ENTER)
    assert "more than one word" in message(page)
    page.find_element(By.ID, "tab-nearest").click()
    sentence = page.find_element(By.ID, "nearest-sentence")
    sentence.clear()
    sentence.send_keys("The vault was robbed")
    page.find_element(By.XPATH, "//div[@id='nearest-tokens']/button[text()='vault']").click()
    assert "does not occur in the corpus" in message(page)
    assert page.find_element(By.CSS_SELECTOR, "#nearest-results h2").text == "elmo-en-small"


def test_nearest_contexts_reached_by_keyboard(page, encoders):
    wait_for(page, "#across-results table.matrix")
    tab = page.find_element(By.ID, "tab-across")
    tab.send_keys(Keys.ARROW_RIGHT)  # the tab list moves with the arrow keys
    assert page.find_element(By.ID, "tab-nearest").get_attribute("aria-selected") == "true"
    tables = wait_for(page, "#nearest-results table.nearest")
    assert len(tables) == 3
    top = tables[2].find_elements(By.CSS_SELECTOR, "tbody tr")[0]
    assert top.find_element(By.TAG_NAME, "mark").text == "play"  # the word the across view compares
    query = page.find_element(By.ID, "nearest-sentence").get_attribute("value").split()
    # the top context is the bundled corpus's occurrence of "play" nearest to the query's
    corpus = [s for s in read_explore_corpus(None, "whitespace")[1] if "play" in s]
    arrays = encoders["elmo-en-small"].embed([query, *corpus])
    a = arrays[0][2, query.index("play")]
    cosines = [float(a @ v[2, s.index("play")] / np.linalg.norm(a) / np.linalg.norm(v[2, s.index("play")]))
               for s, v in zip(corpus, arrays[1:], strict=True)]
    best = top.find_element(By.CSS_SELECTOR, "td .sentence").text.split()
    assert best == corpus[int(np.argmax(cosines))]
    # the corpus's vectors are cached as float16 (a few 1e-4), the page shows 3 decimals
    assert float(top.find_elements(By.TAG_NAME, "td")[0].text) == pytest.approx(max(cosines), abs=2e-3)
    shot(page, "nearest")


def test_two_models_side_by_side(page, encoders):
    wait_for(page, "#across-results table.matrix")
    page.find_element(By.ID, "side-by-side").click()
    wait_for(page, f"#across-results [data-model='{SECOND}'] table.matrix")
    columns = page.find_elements(By.CSS_SELECTOR, "#across-results .column")
    assert [c.get_attribute("data-model") for c in columns] == ["elmo-en-small", SECOND]
    sentences, _ = typed(page)
    tables = columns[1].find_elements(By.CSS_SELECTOR, "table.matrix")
    np.testing.assert_allclose(np.stack([numbers(t) for t in tables]),
                               occurrences_cosines(encoders[SECOND], sentences, "play"), atol=DECIMALS)
    # each model's column says what its own numbers say
    assert len(page.find_elements(By.CSS_SELECTOR, "#across-results .column p.summary")) == 2
    shot(page, "side-by-side")


def test_mix_weights_and_probe_scores(page):
    wait_for(page, "#across-results table.matrix")
    page.find_element(By.ID, "tab-reports").click()
    report = json.loads(PROBE.read_text(encoding="utf-8"))
    mix = report["probes"][-1]
    mixes = wait_for(page, "#report-results table.mixes")[0]
    np.testing.assert_allclose(numbers(mixes), [[*mix["mix_weights"], mix["mix_gamma"]]], atol=DECIMALS)
    scores = page.find_elements(By.CSS_SELECTOR, "#report-results table.scores tbody tr")
    assert [row.text.split()[-1] for row in scores] == [f"{p['dev_accuracy']:.3f}" for p in report["probes"]]
    assert len(charts(page, "#report-results")) == 2
    shot(page, "reports")


def test_a_narrow_window_scrolls_down_not_across(page):
    wait_for(page, "#across-results table.matrix")
    page.set_window_size(420, 900)
    time.sleep(0.3)  # the charts resize on the window's resize event
    width = page.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width
    shot(page, "narrow")


def test_with_an_api_key_the_page_asks_for_it(browser, tmp_path):
    env = {"OMP_NUM_THREADS": "1", "CONTEXTVEC_API_KEY": "sesame", "CONTEXTVEC_CACHE": str(tmp_path)}
    with ServerProcess(["--threads", "1"], env=env) as server:
        browser.get(server.url + "/")
        assert "401: missing or wrong API key" in message(browser)
        key = browser.find_element(By.ID, "api-key")
        assert key.is_displayed() and browser.switch_to.active_element == key
        key.send_keys("sesame", Keys.ENTER)
        assert len(wait_for(browser, "#across-results table.matrix")) == 3
        assert not browser.find_element(By.ID, "message").is_displayed()
    # the 401s the page met are in the browser's log as failed loads; nothing else is
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors and all("401 (Unauthorized)" in e for e in errors), errors
