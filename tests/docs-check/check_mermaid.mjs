// Parse mermaid diagrams with mermaid's own parser (the one GitHub's renderer runs).
// stdin: JSON [{"name": ..., "code": ...}]; stdout: JSON [{"name": ..., "ok": bool, "type"|"error": ...}].
// mermaid expects a browser; jsdom supplies the DOM its sanitiser needs.
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = [];
for (const { name, code } of JSON.parse(input)) {
  try {
    const parsed = await mermaid.parse(code);
    results.push({ name, ok: true, type: parsed.diagramType });
  } catch (error) {
    results.push({ name, ok: false, error: String(error?.message ?? error).split("\n").slice(0, 4).join(" | ") });
  }
}
process.stdout.write(JSON.stringify(results));
