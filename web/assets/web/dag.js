// A layered drawing of a job graph, left to right: each vertex in the layer
// after its furthest input, ordered in its layer by its inputs' positions.
import { el, svg, fmtCount, fmtBytes, pct } from './util.js';

const W = 240, H = 92, GAPX = 90, GAPY = 26, PAD = 16;

// layout returns each node's layer and row, and the layer sizes.
export function layout(nodes) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const layer = new Map();
  const visiting = new Set();
  const depth = (n) => {
    if (layer.has(n.id)) return layer.get(n.id);
    if (visiting.has(n.id)) return 0; // a cycle: not in a valid job graph
    visiting.add(n.id);
    let d = 0;
    for (const i of n.inputs || []) {
      const src = byId.get(i.id);
      if (src) d = Math.max(d, depth(src) + 1);
    }
    visiting.delete(n.id);
    layer.set(n.id, d);
    return d;
  };
  nodes.forEach(depth);
  const layers = [];
  for (const n of nodes) (layers[layer.get(n.id)] ||= []).push(n);
  const row = new Map();
  layers.forEach((ns, l) => {
    if (l > 0) {
      const bary = (n) => {
        const rs = (n.inputs || []).map((i) => row.get(i.id)).filter((r) => r !== undefined);
        return rs.length ? rs.reduce((a, b) => a + b, 0) / rs.length : 0;
      };
      ns.sort((a, b) => bary(a) - bary(b));
    }
    ns.forEach((n, i) => row.set(n.id, i));
  });
  return { layer, row, layers };
}

// draw returns an <svg class="dag"> of plan's nodes; vertices (by id) add
// status, I/O and ratios; ratios (by id) are {bp, busy} in [0, 1].
export function draw(plan, vertices, ratios) {
  const nodes = (plan && plan.nodes) || [];
  const { layer, row, layers } = layout(nodes);
  const tallest = Math.max(1, ...layers.map((l) => l.length));
  const width = PAD * 2 + layers.length * W + Math.max(0, layers.length - 1) * GAPX;
  const height = PAD * 2 + tallest * H + (tallest - 1) * GAPY;
  const pos = (id) => {
    const l = layer.get(id), n = layers[l].length;
    const off = ((tallest - n) * (H + GAPY)) / 2;
    return { x: PAD + l * (W + GAPX), y: PAD + off + row.get(id) * (H + GAPY) };
  };
  const root = svg('svg', { class: 'dag', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'job graph' });
  const defs = svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
    svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#9aa3b5' })));
  root.append(defs);
  for (const n of nodes) {
    for (const i of n.inputs || []) {
      if (!layer.has(i.id)) continue;
      const a = pos(i.id), b = pos(n.id);
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      root.append(svg('path', { class: 'edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, 'marker-end': 'url(#arrow)',
        'data-from': i.id, 'data-to': n.id }));
      root.append(svg('text', { class: 'edge-label', x: mx, y: (y1 + y2) / 2 - 4, 'text-anchor': 'middle' }, i.ship_strategy || ''));
    }
  }
  for (const n of nodes) {
    const v = vertices.get(n.id) || {};
    const m = v.metrics || {};
    const r = ratios.get(n.id) || {};
    const { x, y } = pos(n.id);
    const status = v.status || 'CREATED';
    const g = svg('g', { class: 'node ' + status, transform: `translate(${x},${y})`, 'data-vertex-id': n.id });
    g.append(svg('title', {}, n.description || n.id));
    g.append(svg('rect', { width: W, height: H }));
    if (r.busy !== undefined) g.append(svg('rect', { class: 'busy', x: 1, y: H - 7, width: Math.max(0, (W - 2) * r.busy), height: 3 }));
    if (r.bp !== undefined) g.append(svg('rect', { class: 'bp', x: 1, y: H - 4, width: Math.max(0, (W - 2) * r.bp), height: 3 }));
    const name = n.description || n.id;
    g.append(svg('text', { class: 'title', x: 10, y: 18 }, name.length > 34 ? name.slice(0, 33) + '…' : name));
    g.append(svg('text', { class: 'sub', x: 10, y: 35 }, `${status} · parallelism ${n.parallelism}`));
    g.append(svg('text', { class: 'sub', x: 10, y: 52 }, `in ${fmtCount(m['read-records'])} rec / ${fmtBytes(m['read-bytes'])}`));
    g.append(svg('text', { class: 'sub', x: 10, y: 67 }, `out ${fmtCount(m['write-records'])} rec / ${fmtBytes(m['write-bytes'])}`));
    g.append(svg('text', { class: 'sub', x: 10, y: 82 }, `back-pressure ${pct(r.bp)} · busy ${pct(r.busy)}`));
    root.append(g);
  }
  return el('div', { class: 'dag-wrap' }, root);
}
