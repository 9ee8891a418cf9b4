// arbiter's dashboard: keeps a page live. Every page is whole without this script; with it,
// the regions marked data-live are fetched again and swapped in place when the page's event
// stream (body[data-stream]) says something changed, or every data-refresh seconds.
(function () {
  'use strict';
  var body = document.body;
  var stream = body.getAttribute('data-stream');
  var every = parseInt(body.getAttribute('data-refresh') || '0', 10);
  var status = document.getElementById('live-status');
  function say(text) { if (status) { status.textContent = text; } }

  var inflight = false;
  var again = false;
  var timer = null;
  var last = 0;
  var stale = false;
  // At most one look a second, and none while the page is hidden (it looks again when shown).
  var GAP = 1000;

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, 'text/html');
    var regions = document.querySelectorAll('[data-live]');
    for (var i = 0; i < regions.length; i++) {
      var el = regions[i];
      var next = el.id && fresh.getElementById(el.id);
      if (next && next.outerHTML !== el.outerHTML) {
        el.replaceWith(document.importNode(next, true));
      }
    }
    body.setAttribute('data-updated', String(Date.now()));
    say('Updated ' + new Date().toLocaleTimeString());
  }

  function refresh() {
    if (document.hidden) { stale = true; return; }
    if (inflight) { again = true; return; }
    inflight = true;
    last = Date.now();
    fetch(location.href, { headers: { 'X-Arbiter-Live': '1' }, credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) {
        if (r.status === 401) { location.reload(); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) { if (html) { swap(html); } })
      .catch(function () { say('Not connected; retrying'); })
      .then(function () {
        inflight = false;
        if (again) { again = false; schedule(); }
      });
  }

  function schedule() {
    if (timer) { return; }
    var wait = Math.max(120, GAP - (Date.now() - last));
    timer = setTimeout(function () { timer = null; refresh(); }, wait);
  }

  document.addEventListener('visibilitychange', function () {
    if (!document.hidden && stale) { stale = false; schedule(); }
  });

  var source = null;
  function connect() {
    if (!stream || !window.EventSource || source) { return; }
    source = new EventSource(stream);
    source.onopen = function () { say('Live'); };
    source.onmessage = schedule;
    source.onerror = function () { say('Reconnecting…'); };
  }
  // A page left for another must let go of its stream: a browser may keep the page (its
  // back/forward cache) with the stream open, and over HTTP/1.1 it opens at most six
  // connections to a server — six pages visited would stall the seventh. A page brought
  // back follows its stream again and catches up on what it missed.
  window.addEventListener('pagehide', function () {
    if (source) { source.close(); source = null; }
  });
  window.addEventListener('pageshow', function (e) {
    if (e.persisted) { connect(); schedule(); }
  });
  connect();
  if (every > 0) { setInterval(schedule, every * 1000); }
})();
