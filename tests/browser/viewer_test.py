#!/usr/bin/env python3
"""Browser test of irtool's HTML viewer, in headless Chromium driven over the DevTools protocol.

Loads a page made by `irtool viz MODEL -p default,fuse -o page.html` (a ResNet), then as a user
would: checks it opens on the inputs at a readable zoom (not the whole graph), types into the
search box (a node name, an op type, a fused group's kind), clicks a node and checks the side
panel (op, shapes, attributes), collapses the groups, checks the minimap, and saves a
screenshot. Python's standard library only: the DevTools WebSocket is spoken directly.

usage: viewer_test.py PAGE.html OUTDIR      exit 0 pass, 1 fail, 77 chromium missing (skip)
"""
import base64, http.client, json, os, shutil, socket, struct, subprocess, sys, tempfile, time


class Cdp:
    """A minimal DevTools client: one WebSocket, requests answered by id, events collected."""

    def __init__(self, port, path):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.s.recv(1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("websocket handshake refused: %r" % head[:80])
        self.next_id, self.events = 0, []

    def _send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                               bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                               bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("devtools connection closed")
            buf += chunk
        return buf

    def _recv(self):
        msg = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            payload = self._exact(n)
            if b0 & 0x0F in (0x1, 0x0):
                msg += payload
                if b0 & 0x80:
                    return json.loads(msg)

    def call(self, method, **params):
        self.next_id += 1
        my = self.next_id
        self._send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            m = self._recv()
            if m.get("id") == my:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            for i, e in enumerate(self.events):
                if e.get("method") == name:
                    return self.events.pop(i)
            self.events.append(self._recv())
        raise RuntimeError(f"no {name} within {timeout} s")

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def click(self, x, y):
        for t in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=t, x=x, y=y, button="left", clickCount=1)

    def type_into(self, selector, text):
        self.js(f"(function(){{var e=document.querySelector({json.dumps(selector)});e.focus();e.select();}})()")
        self.call("Input.insertText", text=text)


def find_browser():
    for b in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(b)
        if p:
            return p
    return None


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    page, outdir = os.path.abspath(sys.argv[1]), sys.argv[2]
    browser = find_browser()
    if not browser:
        print("viewer_test: SKIP: chromium not found (apt-get install chromium)")
        return 77
    os.makedirs(outdir, exist_ok=True)
    html = open(page, encoding="utf-8").read()
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    check('src="http' not in html and 'href="http' not in html and "fetch(" not in html,
          "the page is self-contained (no network references)")
    prof = tempfile.mkdtemp(prefix="irviz-chromium-")
    proc = subprocess.Popen([browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                             "--remote-debugging-port=0", f"--user-data-dir={prof}", "--window-size=1400,900",
                             "--hide-scrollbars", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(prof, "DevToolsActivePort")
        for _ in range(300):
            if os.path.exists(port_file) and len(open(port_file).read().split()) >= 2:
                break
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/json/list")
        targets = [t for t in json.loads(conn.getresponse().read()) if t.get("type") == "page"]
        ws = targets[0]["webSocketDebuggerUrl"]
        cdp = Cdp(port, ws[ws.index("/devtools/"):])
        cdp.call("Page.enable")
        cdp.call("Runtime.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=900, deviceScaleFactor=1, mobile=False)
        cdp.call("Page.navigate", url="file://" + page)
        cdp.wait_event("Page.loadEventFired")
        errors = [e for e in cdp.events if e.get("method") == "Runtime.exceptionThrown"]
        check(not errors, "the viewer's script runs without exceptions")

        # opens on the inputs at a readable zoom, not the whole graph
        st = cdp.js("""(function(){var s=document.querySelector('#view svg'),v=s.getAttribute('viewBox').split(' ').map(Number),
            m=document.querySelector('#mini svg').getAttribute('viewBox').split(' ').map(Number),
            r=s.getBoundingClientRect(),i=document.querySelector('g.node[id^="in_"]').getBoundingClientRect();
            return {vw:v[2],fw:m[2],fh:m[3],px:r.width,inx:i.left+i.width/2,iny:i.top+i.height/2,
                    top:r.top,bottom:r.bottom,left:r.left,right:r.right};})()""")
        scale = st["vw"] / st["px"]
        check(0.5 <= scale <= 2.0, f"opens at a readable zoom ({scale:.2f} graph units per pixel; whole graph {st['fw']:.0f} x {st['fh']:.0f})")
        check(st["left"] <= st["inx"] <= st["right"] and st["top"] <= st["iny"] <= st["bottom"], "the input is in view at start")
        check(cdp.js("!!document.querySelector('#mini svg use')"), "a minimap is drawn")

        # search: an op type, a fused group kind, a value name
        def found(text):
            cdp.type_into("#q", text)
            return cdp.js("document.getElementById('info').textContent")
        for text, what in (("Conv", "op type"), ("epilogue", "fused group kind"), ("MaxPool", "op type")):
            res = found(text)
            check(res.split(" ")[0] not in ("", "0") and "/" in res, f"search '{text}' ({what}) finds nodes: '{res}'")
        panel_after_search = cdp.js("document.getElementById('panel').classList.contains('open')")
        check(panel_after_search, "a search jump opens the hit's panel")

        # click a node: the side panel shows op, shapes and attributes
        cdp.type_into("#q", "")
        cdp.js("document.getElementById('home').click()")
        pos = cdp.js("""(function(){var r=document.querySelector('#view svg').getBoundingClientRect(),best=null;
            document.querySelectorAll('g.node[id^="n_"]').forEach(function(n){var b=n.getBoundingClientRect();
              var cx=b.left+b.width/2, cy=b.top+b.height/2;
              if(!best&&cx>r.left+10&&cx<r.right-400&&cy>r.top+10&&cy<r.bottom-10) best={x:cx,y:cy,id:n.id};});
            return best;})()""")
        check(pos is not None, "a node box is visible to click")
        if pos:
            cdp.click(pos["x"], pos["y"])
            p = cdp.js("""(function(){var p=document.getElementById('panel');
                return {open:p.classList.contains('open'),text:p.textContent};})()""")
            check(p["open"], f"clicking {pos['id']} opens the side panel")
            check("Outputs" in p["text"] and "f32[" in p["text"], "the panel shows outputs with shapes and dtypes")
            check("Attributes" in p["text"] or "Weights" in p["text"], "the panel shows attributes or weights")
        shot = cdp.call("Page.captureScreenshot", format="png")["data"]
        open(os.path.join(outdir, "viewer.png"), "wb").write(base64.b64decode(shot))
        print("screenshot:", os.path.join(outdir, "viewer.png"))

        # a heat-map page: the first-divergence button jumps to it and the panel names it
        if cdp.js("getComputedStyle(document.getElementById('fdiv')).display !== 'none'"):
            cdp.js("document.getElementById('fdiv').click()")
            p = cdp.js("document.getElementById('panel').textContent")
            check("first divergence" in p and "cosine" in p, "the first-divergence button opens its panel with the error")
            shot = cdp.call("Page.captureScreenshot", format="png")["data"]
            open(os.path.join(outdir, "first_divergence.png"), "wb").write(base64.b64decode(shot))
            print("screenshot:", os.path.join(outdir, "first_divergence.png"))

        # collapse every fused group in the page, then expand again
        n_vis = "document.querySelectorAll('g.node:not([style*=\"display: none\"])').length"
        before = cdp.js(n_vis)
        cdp.js("document.getElementById('collapse').click()")
        during = cdp.js(n_vis)
        cdp.js("document.getElementById('expand').click()")
        after = cdp.js(n_vis)
        check(during < before == after, f"groups collapse and expand in the page ({before} -> {during} -> {after} visible boxes)")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(prof, ignore_errors=True)
    print("viewer_test: " + ("FAIL (%d)" % len(failures) if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
