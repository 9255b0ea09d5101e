// client.mjs - drives `slate serve` with the official `openai` npm client: a non-streaming and a
// streaming chat completion, a completion, the models list and one model. Exits non-zero on any mismatch.
// Usage: node client.mjs BASE_URL API_KEY MODEL_ID
import OpenAI from "openai";

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
let failures = 0;
function check(name, cond, detail) {
  console.log(`${cond ? "ok  " : "FAIL"} - openai client: ${name}${cond ? "" : ": " + detail}`);
  if (!cond) failures++;
}

const models = await client.models.list();
const ids = [];
for await (const m of models) ids.push(m.id);
check("models.list names the served model", ids.includes(model), JSON.stringify(ids));
const one = await client.models.retrieve(model);
check("models.retrieve returns the served model", one.id === model, JSON.stringify(one));
let missing = 0;
try { await client.models.retrieve("no-such-model"); } catch (e) { missing = e.status; }
check("models.retrieve of another id is a 404", missing === 404, String(missing));

const messages = [{ role: "user", content: "Say hello." }];
const r = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
check("chat completion has content", typeof r.choices[0].message.content === "string", JSON.stringify(r));
check("chat completion reports usage", r.usage && r.usage.completion_tokens > 0, JSON.stringify(r.usage));

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 16, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let text = "", chunks = 0, finish = null, usage = null;
for await (const c of stream) {
  chunks++;
  if (c.usage) usage = c.usage;
  if (c.choices.length && c.choices[0].delta.content) text += c.choices[0].delta.content;
  if (c.choices.length && c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
}
check("streamed chat equals the non-streamed one (temperature 0)", text === r.choices[0].message.content,
  JSON.stringify([text, r.choices[0].message.content]));
check("stream ends with a finish reason", finish === "stop" || finish === "length", String(finish));
check("stream carries usage", usage && usage.completion_tokens > 0, JSON.stringify(usage));

const c = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, temperature: 0 });
check("completion has text", typeof c.choices[0].text === "string", JSON.stringify(c));

let status = 0;
try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
} catch (e) { status = e.status; }
check("a wrong API key is refused with 401", status === 401, String(status));

console.log(`${failures ? "client failed" : "client ok"}`);
process.exit(failures ? 1 : 0);
