// Lints every named statement of every cypher/**/*.cypher file with the official
// Neo4j Cypher linter (@neo4j-cypher/language-support, lintCypherQuery), as Cypher 5.
//
// Files are split on their `// name: NAME` headers exactly like
// platform/pathweave/store/statements.py: the body of a statement is its non-comment lines,
// a trailing `;` stripped. The linter gets the procedure and function signatures of a
// Neo4j 5 server with GDS (the package's bundled `testData.mockSchema`, a dump of
// SHOW PROCEDURES / SHOW FUNCTIONS), so unknown or misspelled procedures and
// functions and wrong argument counts are errors; each statement's `$parameters`
// are declared so only their syntax is checked.
//
// Errors (exit 1): syntax and semantic errors, unknown procedures/functions, text
// outside a named statement, a file without statements, a duplicate name (among the
// top-level files, which the store loads together, and within any file), more than
// one statement under one name. Warnings (deprecations) are printed, never fatal.
//
// Usage: node lint.mjs [CYPHER_DIR]   (default: ../../cypher from this file)

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// The package's ESM build does not resolve under plain Node; its CommonJS build does.
const require = createRequire(import.meta.url);
const { lintCypherQuery, parserWrapper, testData } = require('@neo4j-cypher/language-support');

const HEADER = /^\/\/\s*name:\s*([A-Za-z0-9_]+)\s*$/gm;
const PARAMETER = /\$`?([A-Za-z_][A-Za-z0-9_]*)`?/g;
const ERROR = 1; // vscode DiagnosticSeverity.Error
const VERSION = 'CYPHER 5';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(process.argv[2] ?? join(here, '..', '..', 'cypher'));

/** Every *.cypher file under `dir`, sorted, recursively. */
function cypherFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...cypherFiles(path));
    else if (entry.endsWith('.cypher')) out.push(path);
  }
  return out;
}

/** Split a file like pathweave.store.statements.parse: [{name, body, line}] plus layout errors. */
function parseFile(text) {
  const statements = [];
  const errors = [];
  const headers = [...text.matchAll(HEADER)];
  const lineOf = (offset) => text.slice(0, offset).split('\n').length;
  const code = (chunk) =>
    chunk.split('\n').filter((l) => l.trim() && !l.trim().startsWith('//'));
  const preamble = code(text.slice(0, headers.length ? headers[0].index : text.length));
  if (!headers.length) errors.push('no `// name:` statement in this file');
  else if (preamble.length) errors.push(`line 1: text before the first \`// name:\` header: ${preamble[0].trim()}`);
  headers.forEach((match, i) => {
    const start = match.index + match[0].length;
    const end = i + 1 < headers.length ? headers[i + 1].index : text.length;
    const body = code(text.slice(start, end)).join('\n').trim().replace(/;\s*$/, '').trim();
    const line = lineOf(match.index);
    if (!body) errors.push(`line ${line}: statement ${match[1]} has no body`);
    if (statements.some((s) => s.name === match[1])) errors.push(`line ${line}: duplicate name ${match[1]}`);
    statements.push({ name: match[1], body, line });
  });
  return { statements, errors };
}

function lint(body) {
  const parameters = Object.fromEntries([...body.matchAll(PARAMETER)].map((m) => [m[1], null]));
  const schema = {
    procedures: testData.mockSchema.procedures,
    functions: testData.mockSchema.functions,
    defaultLanguage: VERSION,
    parameters,
  };
  const diagnostics = lintCypherQuery(body, schema);
  const count = parserWrapper.parse(body).statementsParsing.filter((s) => s.command.statement.trim()).length;
  if (count > 1) diagnostics.push({ severity: ERROR, message: `${count} statements under one name (one per name)`, range: { start: { line: 0, character: 0 } } });
  return diagnostics;
}

let errors = 0;
let warnings = 0;
let checked = 0;
const topLevel = new Map(); // name -> file, for the files the store loads together
const files = cypherFiles(root);
if (!files.length) {
  console.error(`no .cypher files under ${root}`);
  process.exit(1);
}
for (const file of files) {
  const rel = relative(resolve(root, '..'), file);
  const { statements, errors: layout } = parseFile(readFileSync(file, 'utf8'));
  for (const message of layout) {
    console.log(`${rel}: error: ${message}`);
    errors += 1;
  }
  for (const { name, body, line } of statements) {
    if (dirname(file) === root) {
      if (topLevel.has(name) && topLevel.get(name) !== rel) {
        console.log(`${rel}:${line}: error: ${name} already defined in ${topLevel.get(name)}`);
        errors += 1;
      }
      topLevel.set(name, rel);
    }
    if (!body) continue;
    checked += 1;
    for (const d of lint(body)) {
      const where = `${rel}:${line} ${name} (statement line ${d.range.start.line + 1}, col ${d.range.start.character + 1})`;
      if (d.severity === ERROR) {
        errors += 1;
        console.log(`${where}: error: ${d.message}`);
      } else {
        warnings += 1;
        const message = d.message.length > 160 ? `${d.message.slice(0, 157)}...` : d.message;
        console.log(`${where}: warning: ${message}`);
      }
    }
  }
}
console.log(`cypher-lint (${VERSION}): ${checked} statements in ${files.length} files, ${errors} errors, ${warnings} warnings`);
process.exit(errors ? 1 : 0);
