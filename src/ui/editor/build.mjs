// Builds ../vendor/promql-editor.min.js from editor.js and the exact package versions in
// package-lock.json, and ../vendor/promql-editor.LICENSE from the licenses of every package
// that ends up in the bundle. Run `npm ci && npm run build` here; commit the two files in
// ../vendor/ (node_modules/ is not committed). strata's cargo build never runs this.
import { build } from 'esbuild';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const here = dirname(fileURLToPath(import.meta.url));
const vendor = join(here, '..', 'vendor');
const outfile = join(vendor, 'promql-editor.min.js');

const result = await build({
  entryPoints: [join(here, 'editor.js')],
  bundle: true,
  format: 'esm',
  minify: true,
  target: 'es2020',
  legalComments: 'none',
  metafile: true,
  write: false,
});
// The packages whose code is in the bundle, from esbuild's metafile.
const packages = new Map();
const [output] = Object.values(result.metafile.outputs);
for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
  if (bytesInOutput === 0) continue;
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (!m) continue;
  const dir = join(here, 'node_modules', m[1]);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  packages.set(pkg.name, { name: pkg.name, version: pkg.version, license: pkg.license, dir });
}
const list = [...packages.values()].sort((a, b) => a.name.localeCompare(b.name));

const summary = list.map((p) => `${p.name}@${p.version} (${p.license})`).join(', ');
const banner = `/*! strata's PromQL editor, bundled by src/ui/editor (npm run build): ${summary}. ` +
  'Licenses: promql-editor.LICENSE beside this file. */\n';
const code = banner + result.outputFiles[0].text;
writeFileSync(outfile, code);

const licenseFile = (dir) => readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
let licenses = 'The packages bundled in promql-editor.min.js, each with its license as published in the\n' +
  'package on npm.\n\n' + list.map((p) => `  ${p.name} ${p.version} (${p.license})`).join('\n') + '\n';
for (const p of list) {
  const file = licenseFile(p.dir);
  if (!file) throw new Error(`${p.name} has no license file`);
  licenses += `\n${'='.repeat(78)}\n${p.name} ${p.version} (${p.license})\n${'='.repeat(78)}\n\n`;
  licenses += readFileSync(join(p.dir, file), 'utf8').trim() + '\n';
}
writeFileSync(join(vendor, 'promql-editor.LICENSE'), licenses);

const bytes = Buffer.byteLength(code);
console.log(`${outfile}: ${bytes} bytes, ${gzipSync(code, { level: 9 }).length} gzipped`);
console.log(summary);
