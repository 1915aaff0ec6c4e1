// Reads a JSON array of TraceQL queries on stdin and writes, for each, where Grafana's own
// TraceQL grammar (@grafana/lezer-traceql) finds errors and which attributes it names.
import { parser } from "@grafana/lezer-traceql";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const queries = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const out = queries.map((query) => {
  const errors = [];
  const attributes = [];
  parser.parse(query).iterate({
    enter: (n) => {
      if (n.type.isError) errors.push(n.from);
      if (n.type.name === "AttributeField") {
        const scope = n.node.firstChild ? n.node.firstChild.type.name : "";
        const id = n.node.getChild("Identifier");
        const name = id ? query.slice(id.from, id.to).replace(/^"(.*)"$/, "$1") : "";
        attributes.push({ scope, name });
      }
    },
  });
  return { query, errors, attributes };
});
process.stdout.write(JSON.stringify(out));
