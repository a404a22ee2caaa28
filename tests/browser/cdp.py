"""A small Chrome DevTools Protocol client: open a page in headless Chromium, record console
errors and network requests, evaluate script, click, and take screenshots."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import websocket

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         "--remote-debugging-port=0", "--window-size=1400,900")


def find_chromium() -> str:
    """The browser's path, installing it with scripts/install-browser.sh when missing."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    done = subprocess.run(["bash", str(ROOT / "scripts" / "install-browser.sh")], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"could not install Chromium: {done.stderr.strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1]


LAYOUT_SCRIPT = """(() => {
  const width = document.documentElement.clientWidth;
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || (box.right <= width + 1 && box.left >= -1)) continue;
    let parent = el.parentElement, inside = false;
    while (parent && parent !== document.body) {
      const overflow = getComputedStyle(parent).overflowX;
      if (['auto', 'scroll', 'hidden'].includes(overflow) && parent.getBoundingClientRect().right <= width + 1) {
        inside = true; break;
      }
      parent = parent.parentElement;
    }
    if (!inside) wide.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                           + (typeof el.className === 'string' && el.className ? '.' + el.className : ''));
  }
  const counts = {};
  for (const el of document.querySelectorAll('[id]')) counts[el.id] = (counts[el.id] || 0) + 1;
  const overview = document.getElementById('report:overview');
  return {width: width, scroll_width: document.documentElement.scrollWidth, height: window.innerHeight,
          wide: wide.slice(0, 20), duplicate_ids: Object.keys(counts).filter(k => counts[k] > 1).slice(0, 20),
          overview_bottom: overview ? overview.getBoundingClientRect().bottom + window.scrollY : null};
})()"""


class Browser:
    """One headless Chromium with a fresh profile, driven over one page's websocket."""

    def __init__(self, attempts: int = 2, seconds: float = 60) -> None:
        """Start Chromium; a start that shows no DevTools endpoint within ``seconds`` (a host busy
        with the rest of the suite) is tried again with a fresh profile, ``attempts`` times in all."""
        for attempt in range(1, attempts + 1):
            port = self._start(seconds)
            if port is not None:
                break
            log = (Path(self.profile) / "chromium.log").read_text(errors="replace").strip()[-1500:]
            self.close()
            if attempt == attempts:
                raise RuntimeError(f"Chromium did not start its DevTools endpoint in {seconds:.0f} s "
                                   f"({attempts} attempts); its last output:\n{log}")
        import urllib.request

        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json").read())
        page = next(t for t in targets if t["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable")

    def _start(self, seconds: float) -> str | None:
        """Launch Chromium on a fresh profile; its DevTools port, or None if none shows in time."""
        browser = find_chromium()
        self.profile = tempfile.mkdtemp(prefix="trajlens-chromium-")
        # its temporary folders (org.chromium.Chromium.*) inside the profile, removed with it
        scratch = Path(self.profile) / "tmp"
        scratch.mkdir()
        with open(Path(self.profile) / "chromium.log", "wb") as log:
            self.process = subprocess.Popen([browser, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "TMPDIR": str(scratch)})
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + seconds
        while not port_file.exists() or not port_file.read_text().strip():
            if time.time() > deadline or self.process.poll() is not None:
                return None
            time.sleep(0.1)
        return port_file.read_text().split()[0]

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def open(self, path: Path) -> None:
        """Load a file and wait for its load event."""
        self.events.clear()
        self.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.time() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.time() > deadline:
                raise RuntimeError(f"{path} did not load")
            self.events.append(json.loads(self.socket.recv()))

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def settle(self, seconds: float = 0.3) -> None:
        """Let timers and observers run, collecting events meanwhile."""
        self.evaluate(f"new Promise(r => setTimeout(r, {int(seconds * 1000)}))")

    def console_errors(self) -> list[str]:
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(str(params["exceptionDetails"].get("exception", {}).get("description")
                                  or params["exceptionDetails"].get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(params["entry"].get("text", ""))
        return errors

    def network_requests(self) -> list[str]:
        """Every request to something other than the page's own file."""
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"
                and not e["params"]["request"]["url"].startswith(("file://", "data:", "about:"))]

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params = {"format": "png"}
        if full_page:
            metrics = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": metrics["width"], "height": min(metrics["height"], 6000), "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def layout(self) -> dict:
        """What a reader at this window width meets: the page's width against the window's, the
        elements sticking out of it (outside a horizontally scrolling box), ids used more than
        once, and how far down the page the element ``report:overview`` ends."""
        return self.evaluate(LAYOUT_SCRIPT)

    def close(self) -> None:
        try:
            if hasattr(self, "socket"):
                self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            shutil.rmtree(self.profile, ignore_errors=True)
