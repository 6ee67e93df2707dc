/**
 * The embeddable webchat widget (decisions 7.3), served as GET /webchat/v1/widget.js: plain ES2017 with no
 * framework and nothing fetched from anywhere but this server. A page embeds
 *   <script src="{origin}/webchat/v1/widget.js" data-widget-id="…" async></script>
 * It draws a launcher and a chat panel inside a shadow root (the page's styles cannot reach in), renders every
 * text with textContent (never as HTML), keeps the visitor's session in localStorage, and follows the visitor's
 * stream with EventSource, which reconnects with Last-Event-ID.
 *
 * Kept as a string (no backquote and no dollar-brace inside) so the server serves it as is, from source or dist.
 */
export const WIDGET_JS = String.raw`(function () {
  'use strict';
  var script = document.currentScript;
  if (!script || !window.fetch || !window.EventSource || !Element.prototype.attachShadow) return;
  var widgetId = script.getAttribute('data-widget-id') || '';
  var api = new URL(script.src, location.href).origin + '/webchat/v1';
  var storeKey = 'm2m-webchat:' + widgetId;
  var state = load();
  var seen = {};
  var lastEventId = '0';
  var lastOwnId = null;
  var source = null;
  var creating = null;
  var starting = null;
  var typingTimer = null;
  var opened = false;

  function load() {
    try { return JSON.parse(localStorage.getItem(storeKey) || 'null'); } catch (e) { return null; }
  }
  function save() {
    try { if (state) localStorage.setItem(storeKey, JSON.stringify(state)); else localStorage.removeItem(storeKey); } catch (e) { /* private mode */ }
  }
  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  var host = el('div', { 'data-m2m-webchat': '' });
  var root = host.attachShadow({ mode: 'open' });
  var style = el('style');
  style.textContent = [
    ':host { all: initial; }',
    '* { box-sizing: border-box; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }',
    '.launcher { position: fixed; right: 20px; bottom: 20px; z-index: 2147483000; min-width: 56px; height: 56px; padding: 0 20px; border: 0; border-radius: 28px;',
    '  background: #0b5394; color: #fff; font-size: 16px; font-weight: 600; cursor: pointer; box-shadow: 0 4px 14px rgba(0,0,0,.3); }',
    '.launcher:focus-visible, button:focus-visible, textarea:focus-visible, a:focus-visible { outline: 3px solid #f6b400; outline-offset: 2px; }',
    '.panel { position: fixed; right: 20px; bottom: 88px; z-index: 2147483000; width: 370px; height: min(560px, calc(100vh - 110px)); display: flex; flex-direction: column;',
    '  background: #fff; color: #1b1b1b; border-radius: 14px; box-shadow: 0 8px 30px rgba(0,0,0,.3); overflow: hidden; }',
    '.panel[hidden] { display: none; }',
    'header { display: flex; align-items: center; justify-content: space-between; padding: 12px 14px; background: #0b5394; color: #fff; }',
    'h2 { margin: 0; font-size: 17px; }',
    '.close { background: transparent; color: #fff; border: 0; font-size: 24px; line-height: 1; width: 40px; height: 40px; border-radius: 20px; cursor: pointer; }',
    '.log { flex: 1; overflow-y: auto; padding: 12px; display: flex; flex-direction: column; gap: 8px; background: #f4f6f8; }',
    '.msg { max-width: 80%; padding: 8px 12px; border-radius: 14px; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 15px; line-height: 1.4; }',
    '.in { align-self: flex-end; background: #0b5394; color: #fff; border-bottom-right-radius: 4px; }',
    '.out { align-self: flex-start; background: #fff; color: #1b1b1b; border: 1px solid #c9d1d9; border-bottom-left-radius: 4px; }',
    '.msg img { display: block; max-width: 100%; border-radius: 8px; margin-bottom: 4px; }',
    '.out a { color: #0b5394; } .in a { color: #fff; }',
    '.reaction { font-size: 13px; margin-left: 6px; }',
    '.status { min-height: 22px; padding: 2px 14px; font-size: 13px; color: #4a4a4a; background: #f4f6f8; }',
    '.seen { align-self: flex-end; font-size: 12px; color: #4a4a4a; margin-top: -4px; }',
    'form { display: flex; gap: 8px; padding: 10px; border-top: 1px solid #c9d1d9; background: #fff; }',
    'textarea { flex: 1; resize: none; height: 44px; padding: 10px; font-size: 16px; border: 1px solid #6b7785; border-radius: 10px; color: #1b1b1b; }',
    '.send { min-width: 64px; border: 0; border-radius: 10px; background: #0b5394; color: #fff; font-size: 15px; font-weight: 600; cursor: pointer; }',
    '.send:disabled { background: #5d6b78; }',
    '.error { color: #a4000f; }',
    '@media (max-width: 480px) { .panel { right: 0; bottom: 0; width: 100vw; height: 100%; border-radius: 0; } .launcher { right: 16px; bottom: 16px; } .launcher[aria-expanded="true"] { display: none; } }'
  ].join('\n');
  root.appendChild(style);

  var launcher = el('button', { type: 'button', class: 'launcher', 'aria-label': 'Open chat', 'aria-expanded': 'false', 'aria-controls': 'm2m-panel' }, 'Chat');
  var panel = el('section', { id: 'm2m-panel', class: 'panel', role: 'dialog', 'aria-label': 'Chat with us' });
  panel.hidden = true;
  var header = el('header');
  var title = el('h2', null, 'Chat with us');
  var close = el('button', { type: 'button', class: 'close', 'aria-label': 'Close chat' }, '\u00d7');
  header.appendChild(title);
  header.appendChild(close);
  var log = el('div', { class: 'log', role: 'log', 'aria-live': 'polite', 'aria-label': 'Messages', tabindex: '0' });
  var status = el('div', { class: 'status', role: 'status', 'aria-live': 'polite' });
  var form = el('form');
  var input = el('textarea', { 'aria-label': 'Message', placeholder: 'Write a message\u2026', maxlength: '4096', rows: '1' });
  var send = el('button', { type: 'submit', class: 'send', 'aria-label': 'Send message' }, 'Send');
  form.appendChild(input);
  form.appendChild(send);
  panel.appendChild(header);
  panel.appendChild(log);
  panel.appendChild(status);
  panel.appendChild(form);
  root.appendChild(panel);
  root.appendChild(launcher);

  function setStatus(text, isError) {
    status.textContent = text || '';
    status.className = isError ? 'status error' : 'status';
  }

  function scrollDown() { log.scrollTop = log.scrollHeight; }

  function render(message) {
    if (seen[message.messageId]) return;
    var bubble = el('div', { class: 'msg ' + (message.direction === 'inbound' ? 'in' : 'out'), 'data-message-id': message.messageId });
    var a = message.attachment;
    if (a) {
      var href = api + a.url.replace('/webchat/v1', '') + '?sessionToken=' + encodeURIComponent(state.token);
      if (a.kind === 'image' || /^image\//.test(a.contentType)) {
        var img = el('img', { src: href, alt: a.filename || 'image' });
        img.addEventListener('load', scrollDown);
        bubble.appendChild(img);
      } else {
        var link = el('a', { href: href, download: a.filename || 'file', target: '_blank', rel: 'noopener' }, 'Download ' + (a.filename || 'file'));
        bubble.appendChild(link);
      }
    }
    if (message.text) bubble.appendChild(document.createTextNode(message.text));
    seen[message.messageId] = bubble;
    log.appendChild(bubble);
    if (message.direction === 'inbound') {
      lastOwnId = message.messageId;
      var marker = log.querySelector('.seen');
      if (marker) marker.remove();
    } else {
      hideTyping();
    }
    scrollDown();
  }

  function hideTyping() {
    if (typingTimer) clearTimeout(typingTimer);
    typingTimer = null;
    if (status.getAttribute('data-typing')) { status.removeAttribute('data-typing'); setStatus(''); }
  }
  function showTyping(at) {
    if (at && Date.now() - Date.parse(at) > 10000) return;
    setStatus('Typing\u2026');
    status.setAttribute('data-typing', '1');
    if (typingTimer) clearTimeout(typingTimer);
    typingTimer = setTimeout(hideTyping, 6000);
  }
  function showSeen() {
    var old = log.querySelector('.seen');
    if (old) old.remove();
    // "Seen" sits under the guest's newest message.
    var own = lastOwnId && seen[lastOwnId];
    if (own) { own.after(el('div', { class: 'seen' }, 'Seen')); scrollDown(); }
  }
  function showReaction(data) {
    var bubble = seen[data.messageId];
    if (!bubble) return;
    var old = bubble.querySelector('.reaction');
    if (old) old.remove();
    if (data.emoji) bubble.appendChild(el('span', { class: 'reaction', 'aria-label': 'reaction ' + data.emoji }, data.emoji));
  }

  function request(method, path, body) {
    var headers = { 'content-type': 'application/json' };
    var used = state;
    if (used) headers.authorization = 'Bearer ' + used.token;
    return fetch(api + path, { method: method, headers: headers, body: body ? JSON.stringify(body) : undefined, mode: 'cors', credentials: 'omit' }).then(function (res) {
      return res.text().then(function (text) {
        var json = null;
        try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
        // Only the session this call used is forgotten: a late refusal must not drop a newer session.
        if (res.status === 401 && used && state === used) forget();
        if (!res.ok) { var error = new Error((json && json.error && json.error.message) || ('HTTP ' + res.status)); error.status = res.status; throw error; }
        return json;
      });
    });
  }

  // The session expired (30 days idle) or was removed: the next call starts a new one from scratch.
  function forget() {
    state = null;
    save();
    lastEventId = '0';
    if (source) { source.close(); source = null; }
  }

  // One session request and one start at a time: the page's load, the panel's opening and a send may all ask.
  function ensureSession() {
    if (state) return Promise.resolve(state);
    if (!creating) {
      creating = request('POST', '/sessions', { widgetId: widgetId }).then(function (created) {
        creating = null;
        state = { token: created.sessionToken, visitorId: created.visitorId };
        save();
        return state;
      }, function (error) { creating = null; throw error; });
    }
    return creating;
  }

  function history(after) {
    return request('GET', '/messages?after=' + after).then(function (page) {
      page.messages.forEach(function (m) { render(m); lastEventId = m.eventId; });
      if (page.messages.length === 200) return history(lastEventId);
    });
  }

  function connect() {
    if (source || !state) return;
    source = new EventSource(api + '/stream?sessionToken=' + encodeURIComponent(state.token) + '&after=' + lastEventId);
    source.addEventListener('message', function (e) { lastEventId = e.lastEventId || lastEventId; render(JSON.parse(e.data)); });
    source.addEventListener('typing', function (e) { lastEventId = e.lastEventId || lastEventId; showTyping(JSON.parse(e.data).at); });
    source.addEventListener('read', function (e) { lastEventId = e.lastEventId || lastEventId; showSeen(); });
    source.addEventListener('reaction', function (e) { lastEventId = e.lastEventId || lastEventId; showReaction(JSON.parse(e.data)); });
    source.onopen = function () { if (status.classList.contains('error')) setStatus(''); };
    source.onerror = function () {
      // The browser retries by itself with Last-Event-ID; when it gave up (the server refused), start again later.
      if (source && source.readyState === EventSource.CLOSED) {
        source = null;
        setTimeout(function () { start().catch(fail); }, 3000);
      }
    };
  }

  function start() {
    if (!starting) {
      starting = attempt(false).then(function () { starting = null; }, function (error) { starting = null; throw error; });
    }
    return starting;
  }
  function attempt(retried) {
    return ensureSession().then(function () { return history(lastEventId); }).then(connect).catch(function (error) {
      if (error && error.status === 401 && !retried) return attempt(true);
      throw error;
    });
  }

  function post(text, retried) {
    return (source && state ? Promise.resolve() : start()).then(function () {
      return request('POST', '/messages', { text: text });
    }).catch(function (error) {
      if (error && error.status === 401 && !retried) return post(text, true);
      throw error;
    });
  }

  function fail(error) {
    setStatus(error && error.status === 429 ? 'You are sending messages too fast; please wait a moment.' : 'Chat is unavailable right now.', true);
  }

  function open() {
    panel.hidden = false;
    opened = true;
    launcher.setAttribute('aria-expanded', 'true');
    launcher.setAttribute('aria-label', 'Close chat');
    input.focus();
    if (!source) start().catch(fail);
  }
  function hide() {
    panel.hidden = true;
    opened = false;
    launcher.setAttribute('aria-expanded', 'false');
    launcher.setAttribute('aria-label', 'Open chat');
    launcher.focus();
  }

  launcher.addEventListener('click', function () { if (opened) hide(); else open(); });
  close.addEventListener('click', hide);
  panel.addEventListener('keydown', function (e) { if (e.key === 'Escape') { e.preventDefault(); hide(); } });
  input.addEventListener('keydown', function (e) {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit ? form.requestSubmit() : submit(e); }
  });
  function submit(e) {
    if (e) e.preventDefault();
    var text = input.value;
    if (!text.trim()) return;
    send.disabled = true;
    post(text, false).then(function (sent) {
      input.value = '';
      setStatus('');
      render({ messageId: sent.messageId, direction: 'inbound', type: 'text', text: text });
    }).catch(fail).then(function () { send.disabled = false; input.focus(); });
  }
  form.addEventListener('submit', submit);

  function mount() {
    document.body.appendChild(host);
    if (state) start().catch(function () { /* shown when the panel opens */ });
  }
  if (document.body) mount(); else document.addEventListener('DOMContentLoaded', mount);
})();
`;
