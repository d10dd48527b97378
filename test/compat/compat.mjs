// make test-compat: drives a running `router dev` through Qdrant's official
// JavaScript client and LangChain's Qdrant vector store, unchanged, and
// checks every answer against a brute force computed here: the points
// routes on the dev collection, LangChain creating its own 384-D collection
// (fromTexts), and a 768-D Dot collection's lifecycle through the client
// (payload indexes, keyword and uuid, query and queryBatch, facet, search,
// query and recommend groups, recommend, scroll order_by, updateCollection
// switching int8 on and off, aliases, delete, re-create). It
// prints every client call and its result; it exits non-zero on the first
// mismatch, and removes the collections it created when it passes.
//
// TRAWL_URL is the router (http://127.0.0.1:PORT), TRAWL_DIM the dev
// cluster's --dim, TRAWL_COLLECTION its --collection (default trawl).
import assert from "node:assert/strict";

import { QdrantClient } from "@qdrant/js-client-rest";
import { QdrantVectorStore } from "@langchain/qdrant";
import { Embeddings } from "@langchain/core/embeddings";
import { Document } from "@langchain/core/documents";

const url = process.env.TRAWL_URL;
const dim = Number(process.env.TRAWL_DIM);
const collection = process.env.TRAWL_COLLECTION ?? "trawl";
assert.ok(url && dim > 0, "TRAWL_URL and TRAWL_DIM must be set");

let calls = 0;
function show(v) {
  const s = JSON.stringify(v, (_k, x) => (Array.isArray(x) && x.length > 8 && typeof x[0] === "number" ? `[${x.length} floats]` : x));
  return s === undefined ? "undefined" : s.length > 400 ? s.slice(0, 400) + "…" : s;
}
// call runs one client call, prints it and its result, and returns it.
async function call(name, args, fn) {
  calls++;
  const res = await fn();
  console.log(`#${calls} ${name}(${show(args)})\n    -> ${show(res)}`);
  return res;
}
// refused runs a call that must fail with the given HTTP status and
// prints Qdrant's error message.
async function refused(name, args, status, fn) {
  calls++;
  try {
    await fn();
  } catch (e) {
    const msg = e?.data?.status?.error ?? e?.message;
    console.log(`#${calls} ${name}(${show(args)})\n    -> refused ${e?.status}: ${msg}`);
    assert.equal(e?.status, status, `${name}: status ${e?.status}, want ${status}: ${msg}`);
    assert.ok(typeof msg === "string" && msg.length > 0, `${name}: no error message`);
    return msg;
  }
  assert.fail(`${name} succeeded, want HTTP ${status}`);
}

// A deterministic embedding: a seeded pseudo-random unit vector of d
// dimensions per text (FNV-1a seed, mulberry32 stream), the same on every
// run.
function embed(text, d = dim) {
  let h = 0x811c9dc5;
  for (const c of text) {
    h ^= c.codePointAt(0);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  let a = h;
  const v = [];
  for (let i = 0; i < d; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    v.push(((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5);
  }
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

class FakeEmbeddings extends Embeddings {
  constructor(d = dim) {
    super({});
    this.d = d;
  }
  async embedDocuments(texts) {
    return texts.map((t) => embed(t, this.d));
  }
  async embedQuery(text) {
    return embed(text, this.d);
  }
}

const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
const unit = (v) => {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};

// The brute force: cosine scores of every point that passes keep, best
// first, ties by id as trawl breaks them (ascending string).
function bruteForce(points, q, k, keep = () => true) {
  const uq = unit(q);
  return rank(points.filter(keep).map((p) => ({ id: p.id, score: dot(unit(p.vector), uq) })), k);
}
// bruteForceDot is bruteForce under the Dot distance.
function bruteForceDot(points, q, k, keep = () => true) {
  return rank(points.filter(keep).map((p) => ({ id: p.id, score: dot(p.vector, q) })), k);
}
function rank(scored, k) {
  return scored.sort((a, b) => b.score - a.score || (String(a.id) < String(b.id) ? -1 : 1)).slice(0, k);
}
function sameHits(got, want, what) {
  assert.deepEqual(
    got.map((h) => h.id),
    want.map((h) => h.id),
    `${what}: ids ${show(got.map((h) => h.id))}, brute force ${show(want.map((h) => h.id))}`,
  );
  got.forEach((h, i) => assert.ok(Math.abs(h.score - want[i].score) < 1e-4, `${what}: score of ${h.id} ${h.score}, brute force ${want[i].score}`));
}
// Qdrant's id order: integers ascending, then UUIDs (bytewise on the
// canonical form).
function idOrder(a, b) {
  const an = typeof a === "number", bn = typeof b === "number";
  if (an && bn) return a - b;
  if (an) return -1;
  if (bn) return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

const client = new QdrantClient({ url, checkCompatibility: true });

const root = await call("versionInfo", {}, () => client.versionInfo());
assert.match(root.version, /^1\.\d+\.\d+$/);

const cols = await call("getCollections", {}, () => client.getCollections());
const initial = cols.collections.map((c) => c.name);
assert.ok(initial.includes(collection), `getCollections lists ${collection}`);
for (const name of ["notes", "images"]) assert.ok(!initial.includes(name), `${name} exists before the run`);
assert.equal((await call("collectionExists", collection, () => client.collectionExists(collection))).exists, true);
assert.equal((await call("collectionExists", "other", () => client.collectionExists("other"))).exists, false);

const create = { vectors: { size: dim, distance: "Cosine" } };
assert.equal(await call("createCollection", [collection, create], () => client.createCollection(collection, create)), true);
assert.equal(await call("createCollection (again: idempotent)", [collection, create], () => client.createCollection(collection, create)), true);
const conflict = await refused("createCollection (other settings)", [collection, { vectors: { size: dim + 1, distance: "Cosine" } }], 409, () =>
  client.createCollection(collection, { vectors: { size: dim + 1, distance: "Cosine" } }),
);
assert.match(conflict, /already exists/, "a conflicting create says so in Qdrant's words");
const namedConflict = await refused("createCollection (named vectors over an unnamed one)", [collection, { vectors: { text: create.vectors } }], 409, () =>
  client.createCollection(collection, { vectors: { text: create.vectors } }),
);
assert.match(namedConflict, /already exists/, "named vectors are other settings than the collection's");
await refused("createCollection (Manhattan)", ["other", { vectors: { size: dim, distance: "Manhattan" } }], 400, () =>
  client.createCollection("other", { vectors: { size: dim, distance: "Manhattan" } }),
);

const info0 = await call("getCollection", collection, () => client.getCollection(collection));
assert.equal(info0.status, "green");
assert.equal(info0.config.params.vectors.size, dim);
assert.equal(info0.config.params.vectors.distance, "Cosine");
const before = info0.points_count;

// 60 points: integer ids and UUIDs, payloads with a group to keep them
// apart from the dev corpus.
const colors = ["red", "green", "blue"];
const points = [];
for (let i = 0; i < 60; i++) {
  const id = i % 2 === 0 ? 1000 + i : `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
  points.push({ id, vector: embed(`point ${i}`), payload: { group: "compat", n: i, color: colors[i % 3], tags: i % 4 === 0 ? ["go", "rust"] : ["js"] } });
}
const up = await call("upsert", { wait: true, points: `${points.length} points` }, () => client.upsert(collection, { wait: true, points }));
assert.equal(up.status, "completed");
await refused("upsert (wrong vector size)", { points: [{ id: 1, vector: "[dim-1 floats]" }] }, 400, () =>
  client.upsert(collection, { wait: true, points: [{ id: 1, vector: embed("x").slice(1) }] }),
);
await refused("upsert (named vector)", { points: [{ id: 1, vector: { text: "[dim floats]" } }] }, 400, () =>
  client.upsert(collection, { wait: true, points: [{ id: 1, vector: { text: embed("x") } }] }),
);
await refused("upsert (sparse vector)", { points: [{ id: 1, vector: { s: { indices: [1], values: [0.5] } } }] }, 400, () =>
  client.upsert(collection, { wait: true, points: [{ id: 1, vector: { s: { indices: [1], values: [0.5] } } }] }),
);
const info1 = await call("getCollection", collection, () => client.getCollection(collection));
assert.equal(info1.points_count, before + points.length, "points_count after the upsert");

const q = embed("a query");
const red = { must: [{ key: "group", match: { value: "compat" } }, { key: "color", match: { value: "red" } }] };
const isRed = (p) => p.payload.color === "red";
const hits = await call("search", { vector: "q", limit: 5, filter: red, with_payload: true }, () =>
  client.search(collection, { vector: q, limit: 5, filter: red, with_payload: true }),
);
sameHits(hits, bruteForce(points, q, 5, isRed), "search with a filter");
hits.forEach((h) => assert.equal(h.payload.color, "red"));

const anyTag = { must: { key: "group", match: { value: "compat" } }, should: [{ key: "tags", match: { any: ["rust"] } }], must_not: [{ key: "n", range: { gte: 40 } }] };
const keepTag = (p) => p.payload.tags.includes("rust") && p.payload.n < 40;
const hits2 = await call("search", { vector: "q", limit: 4, offset: 1, filter: anyTag }, () =>
  client.search(collection, { vector: q, limit: 4, offset: 1, filter: anyTag }),
);
sameHits(hits2, bruteForce(points, q, 5, keepTag).slice(1), "search with should, must_not, range and offset");
await refused("search (unsupported filter clause)", { filter: { must: [{ has_vector: "v" }] } }, 400, () =>
  client.search(collection, { vector: q, limit: 3, filter: { must: [{ has_vector: "v" }] } }),
);
await refused("search (wrong vector size)", { vector: "[dim-1 floats]" }, 400, () => client.search(collection, { vector: q.slice(1), limit: 3 }));
await refused("search (unknown collection)", "other", 404, () => client.search("other", { vector: q, limit: 3 }));

const batch = await call("searchBatch", { searches: ["red k=3", "all compat k=2"] }, () =>
  client.searchBatch(collection, {
    searches: [
      { vector: q, limit: 3, filter: red },
      { vector: embed("another"), limit: 2, filter: { must: { key: "group", match: { value: "compat" } } } },
    ],
  }),
);
sameHits(batch[0], bruteForce(points, q, 3, isRed), "searchBatch[0]");
sameHits(batch[1], bruteForce(points, embed("another"), 2), "searchBatch[1]");

const qr = await call("query", { query: "q", limit: 5, filter: red, with_payload: ["n"] }, () =>
  client.query(collection, { query: q, limit: 5, filter: red, with_payload: ["n"] }),
);
sameHits(qr.points, bruteForce(points, q, 5, isRed), "query");
qr.points.forEach((p) => assert.deepEqual(Object.keys(p.payload), ["n"]));
const qn = await call("query", { query: { nearest: "q" }, limit: 3, score_threshold: 0 }, () =>
  client.query(collection, { query: { nearest: q }, limit: 3, filter: red, score_threshold: 0 }),
);
sameHits(qn.points, bruteForce(points, q, 3, (p) => isRed(p)).filter((h) => h.score >= 0), "query nearest with a threshold");
const byID = await call("query", { query: points[0].id, limit: 3 }, () =>
  client.query(collection, { query: points[0].id, limit: 3, filter: { must: { key: "group", match: { value: "compat" } } } }),
);
sameHits(byID.points, bruteForce(points, points[0].vector, 4, (p) => p.id !== points[0].id).slice(0, 3), "query by a point id");
// Hybrid-style queries: two prefetches fused by RRF (Qdrant's k = 2,
// positions from 0) and by DBSF (mean ± 3 sample standard deviations),
// against the same fusion of the brute-force lists.
const q2 = embed("another");
const branches = [
  { query: q, limit: 10, filter: red },
  { query: q2, limit: 12, filter: { must: { key: "group", match: { value: "compat" } } } },
];
const branchLists = [bruteForce(points, q, 10, isRed), bruteForce(points, q2, 12)];
function fuse(lists, score) {
  const sum = new Map();
  lists.forEach((l) => score(l).forEach((s, i) => sum.set(l[i].id, (sum.get(l[i].id) ?? 0) + s)));
  return rank([...sum].map(([id, score]) => ({ id, score })), Infinity);
}
const rrf = (l) => l.map((_, pos) => 1 / (pos + 2));
function dbsf(l) {
  if (l.length === 1) return [0.5];
  const mean = l.reduce((a, h) => a + h.score, 0) / l.length;
  const sd = Math.sqrt(l.reduce((a, h) => a + (h.score - mean) ** 2, 0) / (l.length - 1));
  return l.map((h) => (sd === 0 ? 0.5 : (h.score - (mean - 3 * sd)) / (6 * sd)));
}
const fr = await call("query", { prefetch: "[red q, compat another]", query: { fusion: "rrf" }, limit: 6 }, () =>
  client.query(collection, { prefetch: branches, query: { fusion: "rrf" }, limit: 6, with_payload: ["n"] }),
);
sameHits(fr.points, fuse(branchLists, rrf).slice(0, 6), "query prefetch + fusion rrf");
fr.points.forEach((p) => assert.deepEqual(Object.keys(p.payload), ["n"]));
const fd = await call("query", { prefetch: "[red q, compat another]", query: { fusion: "dbsf" }, limit: 6, offset: 1 }, () =>
  client.query(collection, { prefetch: branches, query: { fusion: "dbsf" }, limit: 6, offset: 1 }),
);
sameHits(fd.points, fuse(branchLists, dbsf).slice(1, 7), "query prefetch + fusion dbsf");
await refused("query (fusion without prefetch)", { query: { fusion: "rrf" } }, 400, () =>
  client.query(collection, { query: { fusion: "rrf" } }),
);

// Scroll through every compat point, 7 at a time.
const compat = { must: { key: "group", match: { value: "compat" } } };
const seen = [];
let offset;
for (let page = 0; ; page++) {
  const res = await call("scroll", { filter: compat, limit: 7, offset, with_payload: ["n"] }, () =>
    client.scroll(collection, { filter: compat, limit: 7, offset, with_payload: ["n"] }),
  );
  seen.push(...res.points.map((p) => p.id));
  if (res.next_page_offset === null || res.next_page_offset === undefined) break;
  offset = res.next_page_offset;
  assert.ok(page < 20, "scroll does not end");
}
assert.deepEqual(seen, points.map((p) => p.id).sort(idOrder), "scroll: every point once, in id order");

const total = await call("count", { filter: compat }, () => client.count(collection, { filter: compat, exact: true }));
assert.equal(total.count, points.length);
const reds = await call("count", { filter: red }, () => client.count(collection, { filter: red }));
assert.equal(reds.count, points.filter(isRed).length);

const got = await call("retrieve", { ids: [points[0].id, points[1].id, 999999], with_vector: true }, () =>
  client.retrieve(collection, { ids: [points[0].id, points[1].id, 999999], with_payload: true, with_vector: true }),
);
assert.deepEqual(got.map((p) => p.id), [points[0].id, points[1].id]);
assert.deepEqual(got[1].payload, points[1].payload);
got.forEach((p, i) => assert.ok(dot(p.vector, unit(points[i].vector)) > 0.9999, "retrieve: the stored (normalised) vector"));

// The scatter_gather block and X-Trawl-Degraded are there beside result,
// for whoever looks (the client does not).
{
  calls++;
  const res = await fetch(`${url}/collections/${collection}/points/count`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ filter: compat }) });
  const body = await res.json();
  console.log(`#${calls} raw POST /collections/${collection}/points/count\n    -> X-Trawl-Degraded: ${res.headers.get("x-trawl-degraded")}, ${show(body)}`);
  assert.equal(res.headers.get("x-trawl-degraded"), "false");
  assert.equal(body.scatter_gather.degraded, false);
  assert.equal(body.result.count, points.length);
}

const del = await call("delete", { wait: true, filter: { must: [...compat.must ? [compat.must] : [], { key: "color", match: { value: "blue" } }] } }, () =>
  client.delete(collection, { wait: true, filter: { must: [compat.must, { key: "color", match: { value: "blue" } }] } }),
);
assert.equal(del.status, "completed");
const left = points.filter((p) => p.payload.color !== "blue");
const after = await call("count", { filter: compat }, () => client.count(collection, { filter: compat }));
assert.equal(after.count, left.length, "count after delete by filter");
const hitsAfter = await call("search", { vector: "q", limit: 10, filter: compat }, () => client.search(collection, { vector: q, limit: 10, filter: compat }));
sameHits(hitsAfter, bruteForce(left, q, 10), "search after delete by filter");
const delIDs = await call("delete", { points: [left[0].id, left[1].id] }, () => client.delete(collection, { wait: true, points: [left[0].id, left[1].id] }));
assert.equal(delIDs.status, "completed");
assert.equal((await call("count", { filter: compat }, () => client.count(collection, { filter: compat }))).count, left.length - 2);

// Point edits, each mirrored on a local copy of the points: the payloads
// and vectors read back, counts and searches must match the mirror.
{
  const live = new Map(left.slice(2).map((p) => [p.id, structuredClone(p)]));
  const mirror = () => [...live.values()];
  const inCompat = (p) => p.payload.group === "compat";
  const checkMirror = async (what) => {
    const ids = [...live.keys()];
    const got = await call("retrieve", { ids: `${ids.length} edited points`, with_vector: true }, () =>
      client.retrieve(collection, { ids, with_payload: true, with_vector: true }),
    );
    assert.equal(got.length, ids.length, `${what}: every point read back`);
    for (const p of got) {
      const m = live.get(p.id);
      assert.deepEqual(p.payload, m.payload, `${what}: payload of ${p.id}`);
      assert.ok(dot(p.vector, unit(m.vector)) > 0.9999, `${what}: vector of ${p.id}`);
    }
    const n = await call("count", { filter: red }, () => client.count(collection, { filter: red }));
    assert.equal(n.count, mirror().filter((p) => inCompat(p) && isRed(p)).length, `${what}: count of red`);
    const hits = await call("search", { vector: "q", limit: 6, filter: compat }, () => client.search(collection, { vector: q, limit: 6, filter: compat }));
    sameHits(hits, bruteForce(mirror().filter(inCompat), q, 6), `${what}: search`);
  };
  const green = { must: [compat.must, { key: "color", match: { value: "green" } }] };
  let r = await call("setPayload", { payload: { hot: true }, filter: green }, () => client.setPayload(collection, { wait: true, payload: { hot: true }, filter: green }));
  assert.equal(r.status, "completed");
  mirror().filter((p) => p.payload.color === "green").forEach((p) => (p.payload.hot = true));
  const [e0, e1, e2, e3] = mirror();
  r = await call("setPayload", { payload: { by: "compat" }, points: [e0.id], key: "meta.src" }, () =>
    client.setPayload(collection, { wait: true, payload: { by: "compat" }, points: [e0.id], key: "meta.src" }),
  );
  assert.equal(r.status, "completed");
  e0.payload.meta = { src: { by: "compat" } };
  r = await call("overwritePayload", { points: [e1.id] }, () =>
    client.overwritePayload(collection, { wait: true, payload: { group: "compat", color: "red", n: -1 }, points: [e1.id] }),
  );
  e1.payload = { group: "compat", color: "red", n: -1 };
  r = await call("deletePayload", { keys: ["tags"], filter: red }, () => client.deletePayload(collection, { wait: true, keys: ["tags"], filter: red }));
  mirror().filter((p) => inCompat(p) && isRed(p)).forEach((p) => delete p.payload.tags);
  r = await call("clearPayload", { points: [e2.id] }, () => client.clearPayload(collection, { wait: true, points: [e2.id] }));
  e2.payload = {};
  await checkMirror("payload edits");

  r = await call("updateVectors", { points: [e3.id, e0.id] }, () =>
    client.updateVectors(collection, { wait: true, points: [{ id: e3.id, vector: q }, { id: e0.id, vector: embed("moved 0") }] }),
  );
  assert.equal(r.status, "completed");
  e3.vector = q;
  e0.vector = embed("moved 0");
  await checkMirror("vector update");
  await refused("updateVectors (an absent point)", { points: [e1.id, 999999] }, 404, () =>
    client.updateVectors(collection, { wait: true, points: [{ id: e1.id, vector: embed("never") }, { id: 999999, vector: embed("never") }] }),
  );
  await refused("deleteVectors", { points: [e1.id], vector: [""] }, 400, () => client.deleteVectors(collection, { wait: true, points: [e1.id], vector: [""] }));
  await refused("setPayload (an empty filter)", { filter: {} }, 400, () => client.setPayload(collection, { wait: true, payload: { x: 1 }, filter: {} }));
  await checkMirror("refused edits");

  const b = { id: 5000, vector: embed("batch"), payload: { group: "compat", color: "green", n: 5000 } };
  const ops = [
    { upsert: { points: [b] } },
    { set_payload: { payload: { batch: true }, filter: green } },
    { update_vectors: { points: [{ id: e1.id, vector: embed("batch 1") }] } },
    { delete_payload: { keys: ["hot"], points: [e0.id] } },
    { overwrite_payload: { payload: { group: "compat", color: "red", n: -2 }, points: [e3.id] } },
    { delete: { points: [e2.id] } },
  ];
  const res = await call("batchUpdate", { operations: ops.map((o) => Object.keys(o)[0]) }, () => client.batchUpdate(collection, { wait: true, operations: ops }));
  assert.equal(res.length, ops.length);
  res.forEach((u) => assert.equal(u.status, "completed"));
  live.set(b.id, structuredClone(b));
  mirror().filter((p) => inCompat(p) && p.payload.color === "green").forEach((p) => (p.payload.batch = true));
  e1.vector = embed("batch 1");
  delete e0.payload.hot;
  e3.payload = { group: "compat", color: "red", n: -2 };
  live.delete(e2.id);
  await checkMirror("batchUpdate");
}

// LangChain's store, unchanged, on the same collection.
const embeddings = new FakeEmbeddings();
const store = await call("QdrantVectorStore.fromExistingCollection", { url, collectionName: collection }, () =>
  QdrantVectorStore.fromExistingCollection(embeddings, { url, collectionName: collection }),
);
const texts = ["the cat sat on the mat", "deadlines bound every fan-out", "partial answers are never silent", "rust and go", "vector search at scale", "a dog in the fog"];
const docs = texts.map((t, i) => new Document({ pageContent: t, metadata: { source: "langchain", i } }));
await call("QdrantVectorStore.addDocuments", `${docs.length} documents`, () => store.addDocuments(docs));
const lcFilter = { must: [{ key: "metadata.source", match: { value: "langchain" } }] };
const found = await call("QdrantVectorStore.similaritySearchWithScore", ["partial answers", 3, lcFilter], () =>
  store.similaritySearchWithScore("partial answers", 3, lcFilter),
);
const lcPoints = texts.map((t, i) => ({ id: t, vector: embed(t), payload: { i } }));
const want = bruteForce(lcPoints, embed("partial answers"), 3);
assert.deepEqual(found.map(([d]) => d.pageContent), want.map((h) => h.id), "LangChain similaritySearchWithScore: brute-force order");
found.forEach(([d, s], i) => {
  assert.equal(d.metadata.source, "langchain");
  assert.ok(Math.abs(s - want[i].score) < 1e-4, `LangChain score ${s}, brute force ${want[i].score}`);
});
await call("QdrantVectorStore.delete", { filter: lcFilter }, () => store.delete({ filter: lcFilter }));
const cleanup = { must: { key: "group", match: { value: "compat" } } };
await call("delete", { filter: cleanup }, () => client.delete(collection, { wait: true, filter: cleanup }));
const info2 = await call("getCollection", collection, () => client.getCollection(collection));
assert.equal(info2.points_count, before, "points_count back where it started");

// LangChain creating its own collection: fromTexts lists the collections,
// finds no "notes", creates it with its embeddings' size (384) and Cosine,
// and upserts the texts under UUIDs.
const notesDim = 384;
const notesEmbeddings = new FakeEmbeddings(notesDim);
const notesTexts = [
  "scatter the query to every shard",
  "gather the top-k lists",
  "merge them into one answer",
  "a deadline bounds the fan-out",
  "a missing shard makes the answer degraded",
  "replicas fail over",
  "hedged requests cut the tail",
  "int8 codes then exact re-scoring",
];
const notesStore = await call("QdrantVectorStore.fromTexts", { texts: notesTexts.length, collectionName: "notes", dims: notesDim }, () =>
  QdrantVectorStore.fromTexts(notesTexts, notesTexts.map((_, i) => ({ source: "notes", i })), notesEmbeddings, { url, collectionName: "notes" }),
);
const notesInfo = await call("getCollection", "notes", () => client.getCollection("notes"));
assert.equal(notesInfo.config.params.vectors.size, notesDim);
assert.equal(notesInfo.config.params.vectors.distance, "Cosine");
assert.equal(notesInfo.points_count, notesTexts.length);
const notesPoints = notesTexts.map((t) => ({ id: t, vector: embed(t, notesDim) }));
for (const question of ["how is a partial answer marked", "what bounds the time"]) {
  const res = await call("QdrantVectorStore.similaritySearchWithScore", [question, 4], () => notesStore.similaritySearchWithScore(question, 4));
  const want = bruteForce(notesPoints, embed(question, notesDim), 4);
  assert.deepEqual(res.map(([d]) => d.pageContent), want.map((h) => h.id), `LangChain on notes: brute-force order for ${question}`);
  res.forEach(([, sc], i) => assert.ok(Math.abs(sc - want[i].score) < 1e-4, `LangChain score ${sc}, brute force ${want[i].score}`));
}
// A second store on the collection finds it (no create), and a create
// equal to what LangChain made is a no-op, a different one a conflict.
await call("QdrantVectorStore.fromExistingCollection", { collectionName: "notes" }, () =>
  QdrantVectorStore.fromExistingCollection(notesEmbeddings, { url, collectionName: "notes" }),
);
assert.equal(await call("createCollection (equal to LangChain's)", ["notes", { vectors: { size: notesDim, distance: "Cosine" } }], () =>
  client.createCollection("notes", { vectors: { size: notesDim, distance: "Cosine" } })), true);
await refused("createCollection (notes as Dot)", ["notes", { vectors: { size: notesDim, distance: "Dot" } }], 409, () =>
  client.createCollection("notes", { vectors: { size: notesDim, distance: "Dot" } }),
);

// The Qdrant client on a 768-D Dot collection: a payload index, query and
// queryBatch equal to the brute force, aliases, delete and re-create.
const imgDim = 768;
const images = "images";
const imgCreate = { vectors: { size: imgDim, distance: "Dot" }, hnsw_config: { m: 16, ef_construct: 100 }, optimizers_config: { default_segment_number: 2 }, on_disk_payload: true };
assert.equal(await call("createCollection", [images, imgCreate], () => client.createCollection(images, imgCreate)), true);
const idx = await call("createPayloadIndex", { field_name: "kind", field_schema: "keyword" }, () =>
  client.createPayloadIndex(images, { field_name: "kind", field_schema: "keyword", wait: true }),
);
assert.equal(idx.status, "completed");
// A uuid index: match compares UUIDs however each is written.
const ref = "6f9619ff-8b86-d011-b42d-00cf4fc964ff";
assert.equal((await call("createPayloadIndex", { field_name: "ref", field_schema: "uuid" }, () =>
  client.createPayloadIndex(images, { field_name: "ref", field_schema: "uuid", wait: true }))).status, "completed");
// Vectors of different lengths, so Dot ranks unlike Cosine.
const imgPoints = Array.from({ length: 50 }, (_, i) => ({
  id: i + 1,
  vector: embed(`image ${i}`, imgDim).map((x) => x * (1 + (i % 5))),
  payload: {
    kind: i % 3 === 0 ? "cat" : "dog", n: i, shade: `s${i % 4}`, caption: `${i % 3 === 0 ? "Cat" : "Dog"} photo #${i}, ${i % 2 ? "indoors" : "outdoors"}`,
    ...(i < 10 ? { ref: i % 2 ? ref.toUpperCase() : `{${ref}}` } : {}),
  },
}));
assert.equal((await call("upsert", { points: `${imgPoints.length} points of ${imgDim} dims` }, () => client.upsert(images, { wait: true, points: imgPoints }))).status, "completed");
const imgInfo = await call("getCollection", images, () => client.getCollection(images));
assert.equal(imgInfo.points_count, imgPoints.length);
assert.equal(imgInfo.config.params.vectors.distance, "Dot");
assert.deepEqual(imgInfo.payload_schema, { kind: { data_type: "keyword", points: imgPoints.length }, ref: { data_type: "uuid", points: 10 } });
const byRef = await call("count", { filter: { must: [{ key: "ref", match: { value: ref.replaceAll("-", "") } }] } }, () =>
  client.count(images, { filter: { must: [{ key: "ref", match: { value: ref.replaceAll("-", "") } }] }, exact: true }),
);
assert.equal(byRef.count, 10, "a uuid index matches every way of writing the UUID");

// A text index: match.text matches tokens (every word of the query, in
// any case and order); without one it is a substring, as in Qdrant.
{
  const words = (s) => s.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const textFilter = { must: [{ key: "caption", match: { text: "INDOORS cat" } }] };
  const hasWords = (p) => ["indoors", "cat"].every((w) => words(p.payload.caption).includes(w));
  const plain = await call("count", { filter: textFilter, note: "no text index yet" }, () => client.count(images, { filter: textFilter, exact: true }));
  assert.equal(plain.count, imgPoints.filter((p) => p.payload.caption.includes("INDOORS cat")).length, "match.text without a text index: a substring");
  await refused("createPayloadIndex (prefix tokenizer)", { field_name: "caption", field_schema: { type: "text", tokenizer: "prefix" } }, 400, () =>
    client.createPayloadIndex(images, { field_name: "caption", field_schema: { type: "text", tokenizer: "prefix" }, wait: true }),
  );
  const textSchema = { type: "text", tokenizer: "word", lowercase: true, min_token_len: 2 };
  assert.equal((await call("createPayloadIndex", { field_name: "caption", field_schema: textSchema }, () =>
    client.createPayloadIndex(images, { field_name: "caption", field_schema: textSchema, wait: true }))).status, "completed");
  const tokens = await call("count", { filter: textFilter }, () => client.count(images, { filter: textFilter, exact: true }));
  assert.equal(tokens.count, imgPoints.filter(hasWords).length, "match.text with a text index: every token");
  assert.ok(tokens.count > 0);
  const tv = embed("a captioned image", imgDim);
  const tq = await call("query", { query: "tv", limit: 4, filter: textFilter }, () => client.query(images, { query: tv, limit: 4, filter: textFilter }));
  sameHits(tq.points, bruteForceDot(imgPoints, tv, 4, hasWords), "query with match.text");
  const schema = (await call("getCollection", images, () => client.getCollection(images))).payload_schema;
  assert.deepEqual(schema.caption, { data_type: "text", params: { type: "text", tokenizer: "word", lowercase: true, min_token_len: 2 }, points: imgPoints.length });
  assert.equal(await call("deletePayloadIndex", [images, "caption"], async () => (await client.deletePayloadIndex(images, "caption")).status), "completed");
}

const iq = embed("a query image", imgDim);
const cats = { must: [{ key: "kind", match: { value: "cat" } }] };
const isCat = (p) => p.payload.kind === "cat";
const iqr = await call("query", { query: "iq", limit: 5, filter: cats }, () => client.query(images, { query: iq, limit: 5, filter: cats }));
sameHits(iqr.points, bruteForceDot(imgPoints, iq, 5, isCat), "query on images");
const iq2 = embed("another query image", imgDim);
const qb = await call("queryBatch", { searches: ["iq cats k=4", "iq2 k=3 offset 2", "by id 9 k=3"] }, () =>
  client.queryBatch(images, {
    searches: [
      { query: iq, limit: 4, filter: cats, with_payload: true },
      { query: { nearest: iq2 }, limit: 3, offset: 2 },
      { query: 9, limit: 3 },
    ],
  }),
);
assert.equal(qb.length, 3);
sameHits(qb[0].points, bruteForceDot(imgPoints, iq, 4, isCat), "queryBatch[0]");
qb[0].points.forEach((p) => assert.equal(p.payload.kind, "cat"));
sameHits(qb[1].points, bruteForceDot(imgPoints, iq2, 5).slice(2), "queryBatch[1]");
sameHits(qb[2].points, bruteForceDot(imgPoints, imgPoints[8].vector, 3, (p) => p.id !== 9), "queryBatch[2]");
await refused("query (wrong vector size)", { query: `[${imgDim - 1} floats]` }, 400, () => client.query(images, { query: iq.slice(1), limit: 3 }));
await refused("queryBatch (wrong vector size)", { searches: ["ok", `[${imgDim + 1} floats]`] }, 400, () =>
  client.queryBatch(images, { searches: [{ query: iq, limit: 1 }, { query: [...iq, 0], limit: 1 }] }),
);

// Facet, groups, recommend and scroll order_by, each against the brute
// force over imgPoints.
{
  const facet = await call("facet", { key: "shade", filter: cats, limit: 3 }, () => client.facet(images, { key: "shade", filter: cats, limit: 3 }));
  const counts = new Map();
  imgPoints.filter(isCat).forEach((p) => counts.set(p.payload.shade, (counts.get(p.payload.shade) ?? 0) + 1));
  const wantFacet = [...counts].map(([value, count]) => ({ value, count })).sort((a, b) => b.count - a.count || (a.value < b.value ? -1 : 1)).slice(0, 3);
  assert.deepEqual(facet.hits, wantFacet, "facet: the brute force's counts");

  // Groups: the groups whose best hit is best, each with its best hits.
  const bruteGroups = (scored, groupSize, limit) => {
    const groups = [];
    for (const h of scored) {
      const v = imgPoints.find((p) => p.id === h.id).payload.shade;
      let g = groups.find((x) => x.id === v);
      if (!g) {
        if (groups.length === limit) continue;
        g = { id: v, hits: [] };
        groups.push(g);
      }
      if (g.hits.length < groupSize) g.hits.push(h);
    }
    return groups;
  };
  const sameGroups = (got, want, what) => {
    assert.deepEqual(got.map((g) => g.id), want.map((g) => g.id), `${what}: group ids`);
    got.forEach((g, i) => sameHits(g.hits, want[i].hits, `${what}: group ${g.id}`));
  };
  const all = bruteForceDot(imgPoints, iq, imgPoints.length);
  const sg = await call("searchPointGroups", { vector: "iq", group_by: "shade", group_size: 2, limit: 3 }, () =>
    client.searchPointGroups(images, { vector: iq, group_by: "shade", group_size: 2, limit: 3 }),
  );
  sameGroups(sg.groups, bruteGroups(all, 2, 3), "searchPointGroups");
  const qg = await call("queryGroups", { query: "iq", group_by: "shade", group_size: 3, limit: 2, filter: cats }, () =>
    client.queryGroups(images, { query: iq, group_by: "shade", group_size: 3, limit: 2, filter: cats }),
  );
  sameGroups(qg.groups, bruteGroups(bruteForceDot(imgPoints, iq, imgPoints.length, isCat), 3, 2), "queryGroups");
  // Groups over a fused prefetch: the fused ranking, grouped.
  const fusedBranches = [{ query: iq, limit: 10, filter: cats }, { query: iq2, limit: 10 }];
  const pg = await call("queryGroups", { prefetch: "[cats iq, iq2]", query: { fusion: "rrf" }, group_by: "shade", group_size: 2, limit: 3 }, () =>
    client.queryGroups(images, { prefetch: fusedBranches, query: { fusion: "rrf" }, group_by: "shade", group_size: 2, limit: 3 }),
  );
  const fused = fuse([bruteForceDot(imgPoints, iq, 10, isCat), bruteForceDot(imgPoints, iq2, 10)], rrf);
  sameGroups(pg.groups, bruteGroups(fused, 2, 3), "queryGroups with prefetch");

  // Recommend (average_vector): 2·avg(positive) − avg(negative), the
  // examples left out.
  const vec = (id) => imgPoints.find((p) => p.id === id).vector;
  const avg = (vs) => vs[0].map((_, j) => vs.reduce((s, v) => s + v[j], 0) / vs.length);
  const recVector = (pos, neg) => {
    const p = avg(pos);
    if (neg.length === 0) return p;
    const n = avg(neg);
    return p.map((x, j) => 2 * x - n[j]);
  };
  const rv = recVector([vec(2), vec(3)], [vec(7)]);
  const notExample = (ids) => (p) => !ids.includes(p.id);
  const rec = await call("recommend", { positive: [2, 3], negative: [7], limit: 5 }, () =>
    client.recommend(images, { positive: [2, 3], negative: [7], limit: 5, strategy: "average_vector" }),
  );
  sameHits(rec, bruteForceDot(imgPoints, rv, 5, notExample([2, 3, 7])), "recommend");
  const qrec = await call("query", { query: { recommend: { positive: [2, "iq2"] } }, limit: 4, filter: cats }, () =>
    client.query(images, { query: { recommend: { positive: [2, iq2], strategy: "average_vector" } }, limit: 4, filter: cats }),
  );
  sameHits(qrec.points, bruteForceDot(imgPoints, recVector([vec(2), iq2], []), 4, (p) => isCat(p) && p.id !== 2), "query recommend");
  const rg = await call("recommendPointGroups", { positive: [3], negative: [7], group_by: "shade", group_size: 2, limit: 2 }, () =>
    client.recommendPointGroups(images, { positive: [3], negative: [7], group_by: "shade", group_size: 2, limit: 2 }),
  );
  sameGroups(rg.groups, bruteGroups(bruteForceDot(imgPoints, recVector([vec(3)], [vec(7)]), imgPoints.length, notExample([3, 7])), 2, 2), "recommendPointGroups");
  await refused("recommend (best_score)", { strategy: "best_score" }, 400, () => client.recommend(images, { positive: [2], limit: 3, strategy: "best_score" }));

  // Scroll in the order of n, descending, among the cats; then from n 20 down.
  const byN = (p) => p.payload.n;
  const ob = await call("scroll", { order_by: { key: "n", direction: "desc" }, filter: cats, limit: 5 }, () =>
    client.scroll(images, { order_by: { key: "n", direction: "desc" }, filter: cats, limit: 5, with_payload: ["n"] }),
  );
  const catsDesc = imgPoints.filter(isCat).sort((a, b) => byN(b) - byN(a));
  assert.deepEqual(ob.points.map((p) => p.id), catsDesc.slice(0, 5).map((p) => p.id), "scroll order_by desc");
  ob.points.forEach((p) => assert.equal(p.order_value, p.payload.n));
  const from = await call("scroll", { order_by: { key: "n", direction: "desc", start_from: 20 }, filter: cats, limit: 3 }, () =>
    client.scroll(images, { order_by: { key: "n", direction: "desc", start_from: 20 }, filter: cats, limit: 3 }),
  );
  assert.deepEqual(from.points.map((p) => p.id), catsDesc.filter((p) => byN(p) <= 20).slice(0, 3).map((p) => p.id), "scroll order_by start_from");

  // PATCH: int8 codes on and off online; the answers stay the brute force's.
  assert.equal(await call("updateCollection", { quantization_config: { scalar: { type: "int8" } } }, () =>
    client.updateCollection(images, { quantization_config: { scalar: { type: "int8", always_ram: true } } })), true);
  const int8Info = await call("getCollection", images, () => client.getCollection(images));
  assert.deepEqual(int8Info.config.quantization_config, { scalar: { type: "int8" } });
  const afterOn = await call("query", { query: "iq", limit: 5, filter: cats }, () => client.query(images, { query: iq, limit: 5, filter: cats }));
  sameHits(afterOn.points, bruteForceDot(imgPoints, iq, 5, isCat), "query after int8 on");
  assert.equal(await call("updateCollection", { optimizers_config: { indexing_threshold: 0 } }, () =>
    client.updateCollection(images, { optimizers_config: { indexing_threshold: 0 } })), true);
  await refused("updateCollection (vectors on_disk)", { vectors: { "": { on_disk: true } } }, 400, () =>
    client.updateCollection(images, { vectors: { "": { on_disk: true } } }),
  );
  assert.equal(await call("updateCollection", { quantization_config: "Disabled" }, () => client.updateCollection(images, { quantization_config: "Disabled" })), true);
  assert.equal((await call("getCollection", images, () => client.getCollection(images))).config.quantization_config ?? null, null);
  const afterOff = await call("query", { query: "iq", limit: 5 }, () => client.query(images, { query: iq, limit: 5 }));
  sameHits(afterOff.points, bruteForceDot(imgPoints, iq, 5), "query after int8 off");
}

// Aliases: the application queries through one.
assert.equal(await call("updateCollectionAliases", { create_alias: { collection_name: images, alias_name: "pictures" } }, () =>
  client.updateCollectionAliases({ actions: [{ create_alias: { collection_name: images, alias_name: "pictures" } }] })), true);
assert.deepEqual((await call("getAliases", {}, () => client.getAliases())).aliases, [{ alias_name: "pictures", collection_name: images }]);
assert.deepEqual((await call("getCollectionAliases", images, () => client.getCollectionAliases(images))).aliases, [{ alias_name: "pictures", collection_name: images }]);
const viaAlias = await call("query", { collection: "pictures", query: "iq", limit: 5, filter: cats }, () => client.query("pictures", { query: iq, limit: 5, filter: cats }));
sameHits(viaAlias.points, bruteForceDot(imgPoints, iq, 5, isCat), "query through an alias");

// Delete: gone at once, aliases with it; created again: empty, and filled
// again equal to the brute force.
assert.equal(await call("deletePayloadIndex", [images, "kind"], async () => (await client.deletePayloadIndex(images, "kind")).status), "completed");
assert.equal(await call("deleteCollection", images, () => client.deleteCollection(images)), true);
assert.equal((await call("collectionExists", images, () => client.collectionExists(images))).exists, false);
await refused("query (deleted collection)", images, 404, () => client.query(images, { query: iq, limit: 3 }));
await refused("query (its alias)", "pictures", 404, () => client.query("pictures", { query: iq, limit: 3 }));
assert.deepEqual((await call("getAliases", {}, () => client.getAliases())).aliases, []);
assert.equal(await call("deleteCollection (again)", images, () => client.deleteCollection(images)), false);
assert.equal(await call("createCollection (again)", [images, imgCreate], () => client.createCollection(images, imgCreate)), true);
const fresh = await call("getCollection", images, () => client.getCollection(images));
assert.equal(fresh.points_count, 0);
assert.deepEqual(fresh.payload_schema, {}, "a re-created collection has no payload indexes");
assert.deepEqual((await call("query", { query: "iq" }, () => client.query(images, { query: iq }))).points, []);
const again = imgPoints.slice(0, 20);
await call("upsert", { points: `${again.length} points` }, () => client.upsert(images, { wait: true, points: again }));
const againHits = await call("query", { query: "iq", limit: 6 }, () => client.query(images, { query: iq, limit: 6 }));
sameHits(againHits.points, bruteForceDot(again, iq, 6), "query on the re-created collection");

// Snapshots (trawl's backups): take one, list it, recover it by the
// download URL into a new collection holding the same points (searches
// equal to the brute force), refuse a recover over an existing one, delete.
const snap = await call("createSnapshot", images, () => client.createSnapshot(images, { wait: true }));
assert.match(snap.name, /\.snapshot$/);
const snaps = await call("listSnapshots", images, () => client.listSnapshots(images));
assert.deepEqual(snaps.map((x) => x.name), [snap.name]);
const copy = `${images}-restored`;
const location = `${url}/collections/${images}/snapshots/${snap.name}`;
assert.equal(await call("recoverSnapshot", [copy, { location }], () => client.recoverSnapshot(copy, { location, priority: "snapshot" })), true);
assert.equal((await call("count", copy, () => client.count(copy, { exact: true }))).count, again.length);
const copyHits = await call("query", { collection: copy, query: "iq", limit: 6 }, () => client.query(copy, { query: iq, limit: 6 }));
sameHits(copyHits.points, bruteForceDot(again, iq, 6), "query on the recovered collection");
await refused("recoverSnapshot (over an existing collection)", [copy, { location }], 409, () => client.recoverSnapshot(copy, { location }));
assert.equal(await call("deleteSnapshot", [images, snap.name], () => client.deleteSnapshot(images, snap.name)), true);
assert.deepEqual(await call("listSnapshots", images, () => client.listSnapshots(images)), []);


// Sparse vectors beside the dense one, as hybrid stores create them: an
// idf sparse vector, points carrying both, a sparse query scored with the
// collection's idf (every point counts in N), and points read back with
// their named vectors. N is the points holding the sparse vector, as
// Qdrant counts its indexed vectors of the name.
const hybrid = "compat-hybrid";
const hyCreate = { vectors: { size: 4, distance: "Dot" }, sparse_vectors: { "text-sparse": { modifier: "idf" } } };
assert.equal(await call("createCollection", [hybrid, hyCreate], () => client.createCollection(hybrid, hyCreate)), true);
const hyInfo = await call("getCollection", hybrid, () => client.getCollection(hybrid));
assert.deepEqual(hyInfo.config.params.sparse_vectors, { "text-sparse": { modifier: "idf" } });
const hyPoints = [];
for (let i = 1; i <= 40; i++) {
  const terms = [...new Set([i % 7, (i * 3) % 11, 20 + (i % 5)])];
  const sparse = { indices: terms, values: terms.map((t) => ((t + i) % 4) + 1) };
  hyPoints.push({ id: i, vector: { "": [1, 0, 0, i / 40], ...(i % 9 === 0 ? {} : { "text-sparse": sparse }) }, payload: { even: i % 2 === 0 } });
}
assert.equal((await call("upsert", { points: `${hyPoints.length} points, dense and sparse` }, () => client.upsert(hybrid, { wait: true, points: hyPoints }))).status, "completed");
function sparseBrute(points, q, k, keep = () => true) {
  const n = points.filter((p) => p.vector["text-sparse"]).length;
  const df = (t) => points.filter((p) => p.vector["text-sparse"]?.indices.includes(t)).length;
  const f = Math.fround;
  const idf = (t) => f(Math.log(f(f(f(f(n - df(t)) + 0.5) / f(df(t) + 0.5)) + 1)));
  const order = q.indices.map((t, i) => [t, q.values[i]]).sort((a, b) => a[0] - b[0]);
  const hits = [];
  for (const p of points) {
    const sv = p.vector["text-sparse"];
    if (!sv || !keep(p)) continue;
    let score = 0, shared = false;
    for (const [t, v] of order) {
      const j = sv.indices.indexOf(t);
      if (j >= 0) {
        score = Math.fround(score + Math.fround(Math.fround(v * idf(t)) * sv.values[j]));
        shared = true;
      }
    }
    if (shared) hits.push({ id: p.id, score });
  }
  hits.sort((a, b) => b.score - a.score || String(a.id).localeCompare(String(b.id)));
  return hits.slice(0, k);
}
const sq = { indices: [3, 21, 6], values: [1, 0.5, 2] };
const sres = await call("query", { using: "text-sparse", query: sq, limit: 5 }, () => client.query(hybrid, { using: "text-sparse", query: sq, limit: 5 }));
const sbrute = sparseBrute(hyPoints, sq, 5);
assert.deepEqual(sres.points.map((p) => Math.fround(p.score)), sbrute.map((h) => h.score), "sparse query scores");
assert.equal(sres.points[0].id, sbrute[0].id);
const evenOnly = { must: [{ key: "even", match: { value: true } }] };
const sfres = await call("query", { using: "text-sparse", query: sq, limit: 4, filter: evenOnly }, () =>
  client.query(hybrid, { using: "text-sparse", query: sq, limit: 4, filter: evenOnly }));
assert.deepEqual(sfres.points.map((p) => Math.fround(p.score)), sparseBrute(hyPoints, sq, 4, (p) => p.payload.even).map((h) => h.score), "filtered sparse query");
const hyGot = await call("retrieve", { ids: [2], with_vector: true }, () => client.retrieve(hybrid, { ids: [2], with_vector: true }));
assert.deepEqual(hyGot[0].vector[""], hyPoints[1].vector[""]);
assert.deepEqual([...hyGot[0].vector["text-sparse"].indices].sort((a, b) => a - b), [...hyPoints[1].vector["text-sparse"].indices].sort((a, b) => a - b));
// Hybrid retrieval: a dense and a sparse prefetch fused by RRF, against
// the fusion of the two brute-force lists.
const hq = [0, 0, 0, 1];
const hyb = await call("query", { prefetch: "[dense hq limit 6, sparse sq limit 6]", query: { fusion: "rrf" }, limit: 5 }, () =>
  client.query(hybrid, { prefetch: [{ query: hq, limit: 6 }, { query: sq, using: "text-sparse", limit: 6 }], query: { fusion: "rrf" }, limit: 5 }));
const hyDense = bruteForceDot(hyPoints.map((p) => ({ id: p.id, vector: p.vector[""] })), hq, 6);
sameHits(hyb.points, fuse([hyDense, sparseBrute(hyPoints, sq, 6)], rrf).slice(0, 5), "hybrid query: dense + sparse prefetch, rrf");
await refused("upsert (repeated sparse index)", { points: [{ id: 1, vector: { "": "[4 floats]", "text-sparse": { indices: [1, 1], values: [1, 2] } } }] }, 400, () =>
  client.upsert(hybrid, { wait: true, points: [{ id: 1, vector: { "": [1, 0, 0, 0], "text-sparse": { indices: [1, 1], values: [1, 2] } } }] }),
);

// Named vectors, as LlamaIndex's Qdrant store creates a hybrid collection:
// only named vectors, a dense "text-dense" and a sparse "text-sparse", plus
// a second dense "image" some points lack. Queries name the vector they
// search; the fused hybrid equals the fusion of the brute-force lists.
const named = "compat-named";
const nmCreate = { vectors: { "text-dense": { size: 4, distance: "Dot" }, image: { size: 3, distance: "Dot" } }, sparse_vectors: { "text-sparse": { modifier: "idf" } } };
assert.equal(await call("createCollection", [named, nmCreate], () => client.createCollection(named, nmCreate)), true);
const nmInfo = await call("getCollection", named, () => client.getCollection(named));
assert.deepEqual(Object.keys(nmInfo.config.params.vectors).sort(), ["image", "text-dense"]);
const nmPoints = hyPoints.map((p, i) => ({
  id: p.id,
  vector: { "text-dense": p.vector[""], ...(i % 3 === 0 ? {} : { image: [i % 5, 1, i / 40] }), ...(p.vector["text-sparse"] ? { "text-sparse": p.vector["text-sparse"] } : {}) },
  payload: p.payload,
}));
assert.equal((await call("upsert", { points: `${nmPoints.length} points, named dense and sparse` }, () => client.upsert(named, { wait: true, points: nmPoints }))).status, "completed");
const withImage = nmPoints.filter((p) => p.vector.image).map((p) => ({ id: p.id, vector: p.vector.image }));
const imgQ = [1, 0, 1];
const imgRes = await call("query", { using: "image", query: imgQ, limit: 5 }, () => client.query(named, { using: "image", query: imgQ, limit: 5 }));
sameHits(imgRes.points, bruteForceDot(withImage, imgQ, 5), "query using a named vector only some points hold");
const nmHyb = await call("query", { prefetch: "[text-dense hq limit 6, text-sparse sq limit 6]", query: { fusion: "rrf" }, limit: 5 }, () =>
  client.query(named, { prefetch: [{ query: hq, using: "text-dense", limit: 6 }, { query: sq, using: "text-sparse", limit: 6 }], query: { fusion: "rrf" }, limit: 5 }));
const nmDense = bruteForceDot(nmPoints.map((p) => ({ id: p.id, vector: p.vector["text-dense"] })), hq, 6);
sameHits(nmHyb.points, fuse([nmDense, sparseBrute(nmPoints, sq, 6)], rrf).slice(0, 5), "named hybrid query: text-dense + text-sparse prefetch, rrf");
const nmGot = await call("retrieve", { ids: [3], with_vector: true }, () => client.retrieve(named, { ids: [3], with_vector: true }));
assert.deepEqual(nmGot[0].vector["text-dense"], nmPoints[2].vector["text-dense"]);
assert.deepEqual(nmGot[0].vector.image, nmPoints[2].vector.image);
await refused("query (using a vector the collection lacks)", { using: "audio", query: imgQ }, 400, () => client.query(named, { using: "audio", query: imgQ, limit: 5 }));

for (const name of [images, "notes", copy, hybrid, named]) {
  assert.equal(await call("deleteCollection", name, () => client.deleteCollection(name)), true);
}
const finalCols = await call("getCollections", {}, () => client.getCollections());
assert.deepEqual(finalCols.collections.map((c) => c.name).sort(), [...initial].sort(), "the collections are those the run began with");

console.log(`\ntest-compat: ${calls} client calls, every answer matched the brute force or the refusal expected`);
