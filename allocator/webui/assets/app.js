// Rondo's status page: polls the agent's /v1/status and /v1/timeline (and
// /v1/jobs/{id} for the job shown) and re-renders; plots are inline SVG.
// Views by the URL's hash: #overview, #jobs (filters: #jobs&state=queued&vc=x
// &user=u&q=text), #vcs, #job=ID. A token (?token= once, then localStorage)
// is sent as X-Nomad-Token on every request.
(function () {
  'use strict';

  const SVGNS = 'http://www.w3.org/2000/svg';
  const KEEP = 720; // samples kept, as the agent's ring
  const PALETTE = ['#2f6fd0', '#d0632f', '#2f9e5a', '#9b4fd0', '#c9a227', '#d04f7a', '#3aa6b9', '#7a7a7a', '#6b8e23', '#8b4513'];
  const RUNS = { admit: 1, keep: 1, resume: 1, migrate: 1, resize: 1, retune: 1 };
  const STOPS = { suspend: 1, preempt: 1 };

  const st = {
    status: null,      // the last /v1/status
    samples: [],       // /v1/timeline, oldest first
    job: null,         // the last /v1/jobs/{id} of the job shown
    jobID: '',
    jobErr: '',
    sort: { key: '', desc: false },
    colors: {},        // name -> colour, stable for the page's life
    timer: 0,
    busy: false,
  };

  // ---------- token ----------
  let token = '';
  (function readToken() {
    const q = new URLSearchParams(location.search);
    const t = q.get('token');
    try {
      if (t) {
        localStorage.setItem('rondo.token', t);
        q.delete('token');
        const rest = q.toString();
        history.replaceState(null, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
      }
      token = t || localStorage.getItem('rondo.token') || '';
    } catch (e) {
      token = t || '';
    }
  })();

  class HTTPError extends Error {
    constructor(status, text) { super(status + ': ' + text); this.status = status; }
  }

  async function get(path) {
    const headers = { Accept: 'application/json' };
    if (token) headers['X-Nomad-Token'] = token;
    const r = await fetch('../' + path, { headers: headers, cache: 'no-store' });
    if (!r.ok) throw new HTTPError(r.status, (await r.text()).trim() || r.statusText);
    return r.json();
  }

  // ---------- DOM helpers ----------
  function $(id) { return document.getElementById(id); }

  function h(tag, attrs) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    for (let i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function s(tag, attrs) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    for (let i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function setAttrs(el, attrs) {
    if (!attrs) return;
    for (const k of Object.keys(attrs)) {
      const v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.setAttribute('class', v);
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function append(el, c) {
    if (c === undefined || c === null || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { append(el, x); }); return; }
    el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }

  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

  function colorOf(name) {
    if (!(name in st.colors)) st.colors[name] = PALETTE[Object.keys(st.colors).length % PALETTE.length];
    return st.colors[name];
  }

  // ---------- formatting ----------
  function when(t) {
    if (!t || t.startsWith('0001-')) return null;
    const d = new Date(t);
    return isNaN(d) ? null : d;
  }

  function dur(sec) {
    if (sec === undefined || sec === null || !isFinite(sec)) return '';
    sec = Math.max(0, Math.round(sec));
    if (sec < 60) return sec + 's';
    const m = Math.floor(sec / 60);
    if (m < 60) return m + 'm ' + String(sec % 60).padStart(2, '0') + 's';
    const hr = Math.floor(m / 60);
    if (hr < 48) return hr + 'h ' + String(m % 60).padStart(2, '0') + 'm';
    return Math.floor(hr / 24) + 'd ' + (hr % 24) + 'h';
  }

  function clock(d) {
    return d ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false }) : '';
  }

  function perType(m) {
    if (!m) return '';
    return Object.keys(m).sort().filter(function (k) { return m[k]; }).map(function (k) { return k + ' ' + m[k]; }).join(', ');
  }

  function pct(x) { return (100 * x).toFixed(x < 0.1 && x > 0 ? 1 : 0) + '%'; }

  function progressOf(j) {
    return j.total_steps > 0 ? Math.min(1, Math.max(0, 1 - j.remaining_steps / j.total_steps)) : 0;
  }

  function gpusOf(j) {
    if (j.gpus && j.gpus.length) return j.gpus.length + ' × ' + j.type + (j.with ? ' (shared with ' + j.with + ')' : '');
    if (j.state === 'done') return '';
    return 'asks ' + Math.max(j.scale_factor || 1, 1);
  }

  function reasonOf(j) {
    if (j.state === 'done') return '';
    return j.pending_reason || j.refused || j.reason || '';
  }

  function etaOf(j) {
    const d = when(j.estimated_completion);
    return d ? (d - Date.now()) / 1000 : null;
  }

  // ---------- routing ----------
  function route() {
    const raw = location.hash.replace(/^#/, '');
    const r = { view: 'overview', job: '', state: '', vc: '', user: '', q: '' };
    raw.split('&').forEach(function (part, i) {
      if (!part) return;
      const eq = part.indexOf('=');
      const k = eq < 0 ? part : decodeURIComponent(part.slice(0, eq));
      const v = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1));
      if (i === 0 && eq < 0 && (k === 'overview' || k === 'jobs' || k === 'vcs')) r.view = k;
      else if (k === 'job') { r.view = 'job'; r.job = v; }
      else if (k in r && k !== 'view') r[k] = v;
    });
    if (r.state || r.vc || r.user || r.q) { if (r.view === 'overview') r.view = 'jobs'; }
    return r;
  }

  function setFilterHash() {
    const parts = ['jobs'];
    [['state', 'filter-state'], ['vc', 'filter-vc'], ['user', 'filter-user'], ['q', 'filter-text']].forEach(function (p) {
      const v = $(p[1]).value;
      if (v) parts.push(p[0] + '=' + encodeURIComponent(v));
    });
    history.replaceState(null, '', '#' + parts.join('&'));
  }

  function showView(r) {
    document.querySelectorAll('section.view').forEach(function (sec) { sec.hidden = sec.dataset.view !== r.view; });
    document.querySelectorAll('#nav a').forEach(function (a) { a.classList.toggle('active', a.dataset.view === r.view); });
    const nj = $('nav-job');
    nj.hidden = r.view !== 'job';
    nj.textContent = 'Job ' + r.job;
    nj.setAttribute('href', '#job=' + encodeURIComponent(r.job));
    document.body.dataset.view = r.view;
  }

  // ---------- polling ----------
  function interval() {
    const rs = st.status && st.status.round_seconds;
    return rs > 0 ? Math.max(500, Math.min(2000, rs * 1000)) : 2000;
  }

  async function poll() {
    clearTimeout(st.timer);
    if (st.busy) return;
    st.busy = true;
    try {
      await refresh();
    } finally {
      st.busy = false;
      st.timer = setTimeout(poll, interval());
    }
  }

  async function refresh() {
    const r = route();
    const last = st.samples.length ? st.samples[st.samples.length - 1].round : 0;
    try {
      const got = await Promise.all([get('v1/status'), get('v1/timeline' + (last ? '?since=' + last : ''))]);
      const status = got[0];
      let samples = got[1] || [];
      if (status.round < last) { // a fresh agent: start over
        samples = (await get('v1/timeline')) || [];
        st.samples = [];
      }
      st.status = status;
      st.samples = st.samples.concat(samples).slice(-KEEP);
      setConn('live', 'live · round ' + status.round);
      banner('');
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        setConn('denied', 'no access');
        banner('The agent refused the request (' + e.message + '). Give a Nomad ACL token:', true);
      } else {
        setConn('offline', 'offline');
        banner('Cannot reach the agent: ' + e.message + '. Retrying…');
      }
    }
    if (r.view === 'job' && r.job) {
      try {
        st.job = await get('v1/jobs/' + encodeURIComponent(r.job));
        st.jobID = r.job;
        st.jobErr = '';
      } catch (e) {
        st.job = null;
        st.jobID = r.job;
        st.jobErr = e.status === 404 ? 'notfound' : e.message;
      }
    }
    render();
  }

  function setConn(kind, text) {
    const c = $('conn');
    c.dataset.conn = kind;
    c.textContent = text;
  }

  function banner(text, askToken) {
    $('banner').hidden = !text;
    $('banner-text').textContent = text;
    $('token-form').hidden = !askToken;
  }

  // ---------- rendering ----------
  function render() {
    const r = route();
    showView(r);
    const status = st.status;
    if (status) {
      renderHeader(status);
      renderSummary(status);
      renderTypes(status);
      renderNodes(status);
      renderJobs(status, r);
      renderVCs(status);
    }
    renderPlots();
    if (r.view === 'job') renderJob(r.job);
    document.body.dataset.loaded = status ? 'true' : 'false';
  }

  function renderHeader(status) {
    $('cluster').textContent = [status.cluster, status.policy].filter(Boolean).join(' · ');
    const parts = ['round ' + status.round + ' (every ' + dur(status.round_seconds) + ')'];
    const lr = when(status.last_round), nr = when(status.next_round);
    if (lr) parts.push('last round ' + clock(lr));
    if (nr) parts.push('next ' + clock(nr));
    // leader is reported with the version (an agent too old to say
    // leaves both out: no claim either way).
    if (status.leader === false && (status.version || status.leader_addr)) {
      parts.push(status.leader_addr ? 'standby (leader: ' + status.leader_addr + ')' : 'standby');
    }
    if (status.durable) parts.push('state in Nomad Variables');
    if (status.version) parts.push('rondo ' + status.version);
    if (status.last_error) parts.push('last error: ' + status.last_error);
    $('footer').textContent = parts.join(' · ');
    const active = (status.jobs || []).filter(function (j) { return j.state !== 'done'; }).length;
    $('nav-jobs-count').textContent = active ? String(active) : '';
  }

  function counts(status) {
    const c = { running: 0, waiting: 0, done: 0 };
    (status.jobs || []).forEach(function (j) {
      if (j.state === 'running') c.running++;
      else if (j.state === 'done') c.done++;
      else c.waiting++;
    });
    return c;
  }

  function renderSummary(status) {
    let used = 0, healthy = 0, total = 0;
    Object.keys(status.types || {}).forEach(function (t) {
      const u = status.types[t];
      used += u.used; total += u.total; healthy += u.total - u.failed;
    });
    const c = counts(status);
    const last = st.samples[st.samples.length - 1];
    const card = function (id, label, value, sub) {
      return h('div', { class: 'card', id: id }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value), h('div', { class: 'sub' }, sub || ''));
    };
    clear($('summary'));
    append($('summary'), [
      card('card-gpus', 'GPUs in use', used + ' / ' + healthy, total > healthy ? (total - healthy) + ' failed' : 'healthy'),
      card('card-util', 'Utilisation', healthy ? pct(used / healthy) : '–', 'now'),
      card('card-running', 'Running', String(c.running), 'jobs'),
      card('card-waiting', 'Waiting', String(c.waiting), 'not running: queued, suspended, …'),
      card('card-done', 'Finished', String(last ? last.finished : c.done), 'since the agent started'),
      card('card-jct', 'Average JCT', last && last.avg_jct_s ? dur(last.avg_jct_s) : '–', 'finish − arrival'),
    ]);
  }

  function bar(frac, color) {
    frac = Math.max(0, Math.min(1, frac || 0));
    const svg = s('svg', { class: 'bar', viewBox: '0 0 100 10', preserveAspectRatio: 'none', role: 'img' },
      s('rect', { x: 0, y: 0, width: 100, height: 10, class: 'bar-bg' }),
      s('rect', { x: 0, y: 0, width: (100 * frac).toFixed(2), height: 10, fill: color || '#2f6fd0' }));
    return svg;
  }

  function renderTypes(status) {
    const tb = clear($('types').tBodies[0]);
    Object.keys(status.types || {}).sort().forEach(function (t) {
      const u = status.types[t];
      const healthy = u.total - u.failed;
      tb.appendChild(h('tr', { 'data-type': t },
        h('td', null, h('span', { class: 'swatch', 'data-color': colorOf(t) }), t),
        h('td', { class: 'num' }, u.used), h('td', { class: 'num' }, healthy), h('td', { class: 'num' }, u.failed || ''),
        h('td', { class: 'bar-col' }, bar(healthy ? u.used / healthy : 0, colorOf(t)))));
    });
    paintSwatches($('types'));
  }

  function paintSwatches(root) {
    // style attributes are not allowed by the page's CSP; an SVG rect is.
    root.querySelectorAll('.swatch[data-color]').forEach(function (sp) {
      if (sp.firstChild) return;
      sp.appendChild(s('svg', { viewBox: '0 0 10 10', width: 10, height: 10 }, s('rect', { width: 10, height: 10, rx: 2, fill: sp.dataset.color })));
    });
  }

  function renderNodes(status) {
    const nodes = status.nodes || [];
    $('nodes-box').hidden = nodes.length === 0;
    const box = clear($('nodes'));
    const vcOf = {};
    (status.jobs || []).forEach(function (j) { vcOf[j.id] = j.vc || j.id; });
    nodes.forEach(function (n) {
      const gpus = (n.gpus || []).map(function (g) {
        const jobs = g.jobs || [];
        const title = g.id + ' (' + g.type + (g.cell ? ', cell ' + g.cell : '') + ')' + (g.healthy ? '' : ' unhealthy') +
          (jobs.length ? ': ' + jobs.join(', ') : ': idle');
        const fill = !g.healthy ? '#c0392b' : jobs.length ? colorOf(vcOf[jobs[0]] || jobs[0]) : '#e4e7ec';
        return s('svg', { class: 'gpu', viewBox: '0 0 20 20', width: 20, height: 20, 'data-gpu': g.id, 'data-jobs': jobs.join(' ') },
          s('title', { text: title }),
          s('rect', { x: 1, y: 1, width: 18, height: 18, rx: 3, fill: fill }),
          jobs.length > 1 ? s('line', { x1: 1, y1: 19, x2: 19, y2: 1, stroke: '#fff', 'stroke-width': 2 }) : null);
      });
      box.appendChild(h('div', { class: 'node' + (n.ready ? '' : ' down'), 'data-node': n.name || n.id },
        h('div', { class: 'node-name' }, n.name || n.id, n.ready ? '' : ' (down)'), h('div', { class: 'gpus' }, gpus)));
    });
    // The colours: the VCs of the jobs on the GPUs, idle, unhealthy.
    const legend = clear($('nodes-legend'));
    const shown = uniq([].concat.apply([], nodes.map(function (n) {
      return (n.gpus || []).map(function (g) { return g.healthy && g.jobs && g.jobs.length ? vcOf[g.jobs[0]] || g.jobs[0] : ''; });
    })));
    shown.map(function (v) { return [v, colorOf(v)]; }).concat([['idle', '#e4e7ec'], ['unhealthy', '#c0392b']]).forEach(function (p) {
      legend.appendChild(h('span', { class: 'item' }, h('span', { class: 'swatch', 'data-color': p[1] }), p[0]));
    });
    paintSwatches(legend);
  }

  // ----- the job table -----
  function fillSelect(id, values, selected) {
    const sel = $(id);
    const have = Array.from(sel.options).slice(1).map(function (o) { return o.value; });
    if (have.join('\n') !== values.join('\n')) {
      while (sel.options.length > 1) sel.remove(1);
      values.forEach(function (v) { sel.add(new Option(v, v)); });
    }
    if (selected !== undefined && document.activeElement !== sel) {
      if (selected && values.indexOf(selected) < 0) sel.add(new Option(selected, selected));
      sel.value = selected;
    }
  }

  function uniq(list) {
    return Array.from(new Set(list.filter(Boolean))).sort();
  }

  const STATE_ORDER = { running: 0, suspended: 1, queued: 2, unschedulable: 3, rejected: 4, done: 5 };

  function sortKey(j, key) {
    switch (key) {
      case 'state': return STATE_ORDER[j.state] !== undefined ? STATE_ORDER[j.state] : 9;
      case 'queue': return j.queue_position || 1e9;
      case 'wait': return j.wait_s || 0;
      case 'gpus': return (j.gpus || []).length || j.scale_factor || 0;
      case 'progress': return progressOf(j);
      case 'eta': { const e = etaOf(j); return e === null ? 1e18 : e; }
      default: return String(j[key] || '').toLowerCase();
    }
  }

  function renderJobs(status, r) {
    const jobs = status.jobs || [];
    fillSelect('filter-state', uniq(jobs.map(function (j) { return j.state; }).concat(['running', 'queued', 'suspended', 'done'])), r.view === 'jobs' ? r.state : undefined);
    fillSelect('filter-vc', uniq(jobs.map(function (j) { return j.vc; })), r.view === 'jobs' ? r.vc : undefined);
    fillSelect('filter-user', uniq(jobs.map(function (j) { return j.user; })), r.view === 'jobs' ? r.user : undefined);
    const ft = $('filter-text');
    if (r.view === 'jobs' && document.activeElement !== ft) ft.value = r.q;
    const f = { state: $('filter-state').value, vc: $('filter-vc').value, user: $('filter-user').value, q: ft.value.trim().toLowerCase() };
    let shown = jobs.filter(function (j) {
      if (f.state && j.state !== f.state) return false;
      if (f.vc && j.vc !== f.vc) return false;
      if (f.user && j.user !== f.user) return false;
      if (f.q) {
        const hay = [j.id, j.user, j.vc, j.state, j.namespace, reasonOf(j), j.type].join(' ').toLowerCase();
        if (hay.indexOf(f.q) < 0) return false;
      }
      return true;
    });
    if (st.sort.key) {
      const k = st.sort.key, sign = st.sort.desc ? -1 : 1;
      shown = shown.slice().sort(function (a, b) {
        const x = sortKey(a, k), y = sortKey(b, k);
        return x < y ? -sign : x > y ? sign : 0;
      });
    }
    document.querySelectorAll('#jobs th[data-sort]').forEach(function (th) {
      th.dataset.sorted = th.dataset.sort === st.sort.key ? (st.sort.desc ? 'desc' : 'asc') : '';
    });
    const tb = clear($('jobs').tBodies[0]);
    shown.forEach(function (j) {
      const p = progressOf(j);
      const eta = etaOf(j);
      const why = reasonOf(j);
      const waiting = j.state !== 'running' && j.state !== 'done';
      tb.appendChild(h('tr', { 'data-job': j.id, 'data-state': j.state, 'data-vc': j.vc || '', 'data-user': j.user || '', class: 'clickable', onclick: function (ev) {
        if (ev.target.closest('a')) return;
        location.hash = 'job=' + encodeURIComponent(j.id);
      } },
        h('td', { class: 'job-id' }, h('a', { href: '#job=' + encodeURIComponent(j.id) }, j.id), j.namespace && j.namespace !== 'default' ? h('span', { class: 'muted' }, ' ' + j.namespace) : null),
        h('td', { class: 'user' }, j.user || ''),
        h('td', { class: 'vc' }, j.vc || ''),
        h('td', { class: 'state-cell' }, h('span', { class: 'state', 'data-state': j.state }, j.state), j.checkpoint_now ? h('span', { class: 'tag', title: 'checkpoint now: stops next round' }, 'notice') : null),
        h('td', { class: waiting && (j.pending_reason || j.refused) ? 'reason pending' : 'reason', 'data-pending-kind': j.pending_kind || null, title: j.intent ? 'last decision: ' + j.intent : null }, why),
        h('td', { class: 'num queue', title: j.priority ? 'round priority ' + j.priority.toPrecision(4) : null }, j.queue_position ? '#' + j.queue_position : ''),
        h('td', { class: 'num wait' }, waiting && j.wait_s ? dur(j.wait_s) : ''),
        h('td', { class: 'gpus' }, gpusOf(j)),
        h('td', { class: 'progress', 'data-progress': p.toFixed(4) }, bar(p, j.state === 'done' ? '#7a7a7a' : '#2f9e5a'), h('span', { class: 'pct' }, pct(p))),
        h('td', { class: 'eta', title: j.estimated_completion || null }, eta !== null ? 'in ' + dur(eta) : '')));
    });
    $('jobs-empty').hidden = jobs.length > 0;
    $('jobs-shown').textContent = shown.length === jobs.length ? jobs.length + ' jobs' : shown.length + ' of ' + jobs.length + ' jobs';
  }

  // ----- virtual clusters -----
  function renderVCs(status) {
    const tb = clear($('vcs').tBodies[0]);
    (status.vcs || []).forEach(function (v) {
      const quota = perType(v.quota) || perType(v.gpus) || perType(v.cells);
      tb.appendChild(h('tr', { 'data-vc': v.name },
        h('td', null, h('span', { class: 'swatch', 'data-color': colorOf(v.name) }), v.name),
        h('td', null, v.policy),
        h('td', null, quota),
        h('td', null, perType(v.used)),
        h('td', null, perType(v.borrowed)),
        h('td', null, perType(v.lent)),
        h('td', { class: 'num' }, v.entitled_gpu_s ? (v.entitled_gpu_s / 3600).toFixed(2) : ''),
        h('td', { class: 'num' }, v.received_gpu_s ? (v.received_gpu_s / 3600).toFixed(2) : ''),
        h('td', { class: 'num' }, v.running || ''),
        h('td', { class: 'num' }, v.pending || '')));
    });
    paintSwatches($('vcs'));
  }

  // ----- plots -----
  // niceStep is a tick step of 1, 2, 2.5 or 5 × 10^k at least v.
  function niceStep(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    const m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
  }

  // chart draws series [{name, color, pts: [[ms, v]], dash}] in fig's .svg:
  // step lines (a round's value holds until the next), or stacked areas.
  function chart(fig, series, opt) {
    opt = opt || {};
    const W = 600, H = opt.height || 200, L = 44, R = 10, T = 8, B = 24;
    const box = fig.querySelector('.svg');
    const legend = fig.querySelector('.legend');
    clear(box);
    clear(legend);
    const pts = [];
    series.forEach(function (se) { se.pts.forEach(function (p) { pts.push(p); }); });
    const svg = s('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart', role: 'img', 'aria-label': fig.querySelector('figcaption').textContent });
    box.appendChild(svg);
    if (pts.length < 1) {
      svg.appendChild(s('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty', text: 'no rounds yet' }));
      return;
    }
    let t0 = Infinity, t1 = -Infinity, vmax = 0;
    pts.forEach(function (p) { t0 = Math.min(t0, p[0]); t1 = Math.max(t1, p[0]); });
    let stacked = null;
    if (opt.stacked) {
      // Cumulative sums over the series at each time.
      const times = Array.from(new Set(pts.map(function (p) { return p[0]; }))).sort(function (a, b) { return a - b; });
      const base = times.map(function () { return 0; });
      stacked = series.map(function (se) {
        const at = new Map(se.pts.map(function (p) { return [p[0], p[1]]; }));
        const lo = base.slice();
        times.forEach(function (t, i) { base[i] += at.get(t) || 0; });
        return { se: se, lo: lo, hi: base.slice() };
      });
      vmax = Math.max.apply(null, base.concat([0]));
      stacked.times = times;
    } else {
      pts.forEach(function (p) { vmax = Math.max(vmax, p[1]); });
    }
    // Four ticks (whole numbers for counts) up to a round maximum.
    let tick = opt.yMax ? opt.yMax / 4 : niceStep(vmax / 4);
    if (opt.counts) tick = Math.max(1, Math.ceil(tick));
    const ymax = opt.yMax || tick * Math.max(1, Math.ceil(vmax / tick));
    const nticks = Math.round(ymax / tick);
    if (t1 === t0) { t0 -= 1000; t1 += 1000; }
    const x = function (t) { return L + (W - L - R) * (t - t0) / (t1 - t0); };
    const y = function (v) { return T + (H - T - B) * (1 - v / ymax); };
    const fmt = opt.fmt || function (v) { return String(+v.toFixed(2)); };
    // Axes and grid.
    for (let i = 0; i <= nticks; i++) {
      const v = tick * i;
      svg.appendChild(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
      svg.appendChild(s('text', { x: L - 4, y: y(v) + 4, 'text-anchor': 'end', class: 'tick', text: fmt(v) }));
    }
    for (let i = 0; i <= 4; i++) {
      const t = t0 + (t1 - t0) * i / 4;
      svg.appendChild(s('text', { x: x(t), y: H - 6, 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle', class: 'tick', text: clock(new Date(t)) }));
    }
    svg.appendChild(s('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis' }));
    svg.appendChild(s('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis' }));
    const step = function (list) { // [[t, v]] -> a step path's points
      let d = '';
      list.forEach(function (p, i) {
        const px = x(p[0]).toFixed(1), py = y(p[1]).toFixed(1);
        if (i === 0) d += 'M' + px + ' ' + py;
        else d += 'H' + px + 'V' + py;
      });
      return d;
    };
    if (stacked) {
      const times = stacked.times;
      stacked.forEach(function (lay) {
        const top = times.map(function (t, i) { return [t, lay.hi[i]]; });
        const bot = times.map(function (t, i) { return [t, lay.lo[i]]; }).reverse();
        // Back along the bottom, right to left: down to the last value,
        // then at each earlier time its value (held until the next time)
        // and across to it.
        let d = step(top);
        bot.forEach(function (p, i) {
          d += 'V' + y(p[1]).toFixed(1);
          if (i > 0) d += 'H' + x(p[0]).toFixed(1);
        });
        d += 'Z';
        svg.appendChild(s('path', { d: d, fill: lay.se.color, 'fill-opacity': 0.55, stroke: lay.se.color, 'stroke-width': 1, 'data-series': lay.se.name }));
      });
    } else {
      series.forEach(function (se) {
        if (!se.pts.length) return;
        const list = se.pts.length === 1 ? [se.pts[0], [t1, se.pts[0][1]]] : se.pts;
        svg.appendChild(s('path', { d: step(list), fill: 'none', stroke: se.color, 'stroke-width': se.dash ? 1.2 : 2,
          'stroke-dasharray': se.dash ? '4 3' : null, 'data-series': se.name }));
      });
    }
    series.filter(function (se) { return !se.dash && !se.noLegend; }).forEach(function (se) {
      const last = se.pts.length ? se.pts[se.pts.length - 1][1] : null;
      legend.appendChild(h('span', { class: 'item', 'data-series': se.name },
        h('span', { class: 'swatch', 'data-color': se.color }), se.name, last !== null ? h('span', { class: 'muted' }, ' ' + fmt(last)) : null));
    });
    paintSwatches(legend);
  }

  function seriesBy(names, pick) {
    return names.map(function (n) {
      return { name: n, color: colorOf(n), pts: st.samples.map(function (smp) { return [Date.parse(smp.time), pick(smp, n) || 0]; }) };
    });
  }

  function renderPlots() {
    const smp = st.samples;
    const types = uniq([].concat.apply([], smp.map(function (x) { return Object.keys(x.healthy || {}); })));
    const used = seriesBy(types, function (x, t) { return (x.used || {})[t]; });
    const healthy = seriesBy(types, function (x, t) { return (x.healthy || {})[t]; })
      .map(function (se) { se.dash = true; se.name += ' healthy'; return se; });
    chart($('plot-usage'), used.concat(healthy), { counts: true });
    chart($('plot-util'), [{ name: 'utilisation', color: '#2f6fd0', pts: smp.map(function (x) { return [Date.parse(x.time), x.utilization || 0]; }) }],
      { yMax: 1, fmt: pct });
    const t = function (x) { return Date.parse(x.time); };
    chart($('plot-jobs'), [
      { name: 'running', color: '#2f9e5a', pts: smp.map(function (x) { return [t(x), x.running || 0]; }) },
      { name: 'waiting', color: '#d0632f', pts: smp.map(function (x) { return [t(x), x.waiting || 0]; }) },
    ], { counts: true });
    chart($('plot-jct'), [{ name: 'average JCT', color: '#9b4fd0', pts: smp.filter(function (x) { return x.avg_jct_s > 0; }).map(function (x) { return [t(x), x.avg_jct_s]; }) }],
      { fmt: dur });
    const vcs = uniq([].concat.apply([], smp.map(function (x) { return Object.keys(x.vc_used || {}); }))
      .concat(((st.status && st.status.vcs) || []).map(function (v) { return v.name; })));
    chart($('plot-vc-used'), seriesBy(vcs, function (x, n) { return (x.vc_used || {})[n]; }), { stacked: true, counts: true });
    chart($('plot-vc-share'), seriesBy(vcs, function (x, n) {
      const all = Object.values(x.vc_used || {}).reduce(function (a, b) { return a + b; }, 0);
      return all ? ((x.vc_used || {})[n] || 0) / all : 0;
    }), { stacked: true, yMax: 1, fmt: pct });
  }

  // ----- one job -----
  function renderJob(id) {
    $('job-id').textContent = id;
    let j = st.jobID === id ? st.job : null;
    let note = '';
    if (!j && st.status) {
      j = (st.status.jobs || []).find(function (x) { return x.id === id; }) || null;
      if (st.jobID === id && st.jobErr && st.jobErr !== 'notfound') note = 'Its history could not be read: ' + st.jobErr;
    }
    const stEl = $('job-state');
    const dl = clear($('job-summary'));
    const ol = clear($('timeline'));
    const empty = $('timeline-empty');
    if (!j) {
      stEl.textContent = '';
      stEl.dataset.state = '';
      empty.hidden = false;
      empty.textContent = st.status ? 'The agent does not know job ' + id + ' (not opted in, or finished long ago).' : 'Loading…';
      chart($('job-strip'), []);
      return;
    }
    stEl.textContent = j.state;
    stEl.dataset.state = j.state;
    const row = function (k, v) { if (v !== '' && v !== null && v !== undefined) { dl.appendChild(h('dt', null, k)); dl.appendChild(h('dd', { 'data-field': k }, v)); } };
    row('user', j.user);
    row('VC', j.vc);
    row('namespace', j.namespace);
    row('GPUs', gpusOf(j));
    row('progress', pct(progressOf(j)) + ' (' + Math.round(j.total_steps - j.remaining_steps) + ' of ' + Math.round(j.total_steps) + ' steps)');
    if (j.throughput_steps_per_s) row('throughput', j.throughput_steps_per_s.toFixed(2) + ' steps/s');
    const eta = etaOf(j);
    if (eta !== null) row('ETA', 'in ' + dur(eta) + ' (' + clock(when(j.estimated_completion)) + ')');
    if (j.pending_reason) row('pending', j.pending_reason);
    if (j.refused) row('refused', j.refused);
    if (j.queue_position) row('queue position', '#' + j.queue_position + (j.priority ? ' (priority ' + j.priority.toPrecision(4) + ')' : ''));
    if (j.wait_s) row('waiting for', dur(j.wait_s));
    if (j.intent) row('last decision', j.intent + (j.reason ? ' — ' + j.reason : ''));
    row('rounds with GPUs', j.rounds);
    if (j.x) row('allocation (X)', Object.keys(j.x).sort().map(function (k) { return k + ' ' + j.x[k].toFixed(2); }).join(', '));
    if (j.received_s) row('received', Object.keys(j.received_s).sort().map(function (k) { return k + ' ' + dur(j.received_s[k]); }).join(', '));
    const hist = j.history || [];
    hist.forEach(function (ev) {
      const d = when(ev.time);
      ol.appendChild(h('li', { 'data-intent': ev.intent, 'data-round': ev.round, class: 'ev ev-' + (RUNS[ev.intent] ? 'run' : STOPS[ev.intent] ? 'stop' : 'other') },
        h('span', { class: 'round' }, 'round ' + ev.round),
        h('time', { datetime: ev.time || null }, d ? clock(d) : ''),
        h('span', { class: 'intent', 'data-intent': ev.intent }, ev.intent),
        ev.type ? h('span', { class: 'where' }, (ev.gpus ? ev.gpus + ' × ' : '') + ev.type) : null,
        ev.reason ? h('span', { class: 'reason' }, ev.reason) : null));
    });
    empty.hidden = hist.length > 0;
    empty.textContent = note || (st.jobID === id && st.jobErr === 'notfound' ? 'This agent serves no job history.' : 'No round has changed this job yet.');
    strip(j, hist);
  }

  // strip draws the job's runs between its events: green while it runs,
  // orange while stopped, a mark and the intent at each event.
  function strip(j, hist) {
    const fig = $('job-strip');
    const box = clear(fig.querySelector('.svg'));
    clear(fig.querySelector('.legend'));
    const W = 900, H = 70, L = 10, R = 10;
    const svg = s('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart strip', role: 'img', 'aria-label': 'job timeline' });
    box.appendChild(svg);
    const evs = hist.map(function (e) { return { t: Date.parse(e.time), e: e }; }).filter(function (x) { return isFinite(x.t); });
    if (!evs.length) {
      svg.appendChild(s('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty', text: 'no events yet' }));
      return;
    }
    const t0 = evs[0].t;
    const end = j.state === 'done' ? evs[evs.length - 1].t + 1000 : Math.max(Date.now(), evs[evs.length - 1].t + 1000);
    const x = function (t) { return L + (W - L - R) * (t - t0) / Math.max(end - t0, 1); };
    svg.appendChild(s('rect', { x: L, y: 22, width: W - L - R, height: 16, class: 'bar-bg' }));
    // A start runs the job, a stop or a wait leaves it without GPUs; any
    // other event (a notice) keeps what it was.
    let running = false;
    evs.forEach(function (ev, i) {
      const next = i + 1 < evs.length ? evs[i + 1].t : end;
      if (RUNS[ev.e.intent]) running = true;
      else if (STOPS[ev.e.intent] || ev.e.intent === 'wait') running = false;
      svg.appendChild(s('rect', { x: x(ev.t).toFixed(1), y: 22, width: Math.max(0.5, x(next) - x(ev.t)).toFixed(1), height: 16,
        fill: running ? '#2f9e5a' : '#d0632f', 'data-intent': ev.e.intent },
        s('title', { text: 'round ' + ev.e.round + ': ' + ev.e.intent + (ev.e.reason ? ' — ' + ev.e.reason : '') })));
    });
    let lastLabel = -1e9;
    evs.forEach(function (ev, i) {
      const px = x(ev.t);
      svg.appendChild(s('line', { x1: px, x2: px, y1: 16, y2: 44, class: 'mark' }));
      if (px - lastLabel > 60) {
        svg.appendChild(s('text', { x: px, y: 12, class: 'tick', 'text-anchor': i === 0 ? 'start' : 'middle', text: ev.e.intent }));
        svg.appendChild(s('text', { x: px, y: 58, class: 'tick', 'text-anchor': i === 0 ? 'start' : 'middle', text: 'r' + ev.e.round }));
        lastLabel = px;
      }
    });
    const legend = fig.querySelector('.legend');
    [['runs', '#2f9e5a'], ['without GPUs (suspended, waiting)', '#d0632f']].forEach(function (p) {
      legend.appendChild(h('span', { class: 'item' }, h('span', { class: 'swatch', 'data-color': p[1] }), p[0]));
    });
    paintSwatches(legend);
  }

  // ---------- events ----------
  function onFilter() {
    setFilterHash();
    if (st.status) renderJobs(st.status, route());
  }

  document.addEventListener('DOMContentLoaded', function () {
    ['filter-state', 'filter-vc', 'filter-user'].forEach(function (id) { $(id).addEventListener('change', onFilter); });
    $('filter-text').addEventListener('input', onFilter);
    $('filters').addEventListener('submit', function (e) { e.preventDefault(); });
    document.querySelectorAll('#jobs th[data-sort]').forEach(function (th) {
      th.addEventListener('click', function () {
        const k = th.dataset.sort;
        st.sort = { key: k, desc: st.sort.key === k ? !st.sort.desc : false };
        if (st.status) renderJobs(st.status, route());
      });
    });
    $('token-form').addEventListener('submit', function (e) {
      e.preventDefault();
      token = $('token-input').value.trim();
      try { localStorage.setItem('rondo.token', token); } catch (err) { /* private mode */ }
      poll();
    });
    window.addEventListener('hashchange', function () {
      const r = route();
      if (r.view === 'job' && r.job !== st.jobID) { st.job = null; st.jobErr = ''; poll(); }
      render();
    });
    poll();
  });
})();
