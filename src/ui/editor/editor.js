// The PromQL editor of strata's query UI: CodeMirror 6 with Prometheus' own PromQL language
// package (@prometheus-io/codemirror-promql), which brings the highlighting grammar, the
// client-side linter (syntax errors are underlined as you type) and the completion of
// functions, keywords, metric names, label names and label values. The last three come from
// strata's HTTP API (/api/v1/label/__name__/values, /api/v1/labels, /api/v1/label/<name>/values,
// /api/v1/series, /api/v1/metadata), the endpoints Prometheus' UI asks.
//
// This file is the entry of `npm run build`, which bundles it with its dependencies into
// ../vendor/promql-editor.min.js (see build.mjs). app.js imports that file.

import { PromQLExtension } from '@prometheus-io/codemirror-promql';
import { autocompletion, closeBrackets, closeBracketsKeymap } from '@codemirror/autocomplete';
import { history, historyKeymap, insertNewlineAndIndent, standardKeymap } from '@codemirror/commands';
import { bracketMatching, HighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { lintKeymap } from '@codemirror/lint';
import { EditorState, Prec } from '@codemirror/state';
import { EditorView, keymap, placeholder as placeholderText } from '@codemirror/view';
import { tags } from '@lezer/highlight';

// Colours close to Prometheus' own UI, on the page's light theme.
const highlight = HighlightStyle.define([
  { tag: tags.number, color: '#09885a' },
  { tag: tags.string, color: '#a31515' },
  { tag: tags.keyword, color: '#008080' },
  { tag: tags.function(tags.variableName), color: '#008080' },
  { tag: tags.labelName, color: '#800000' },
  { tag: tags.operator, color: '#708' },
  { tag: tags.modifier, color: '#708' },
  { tag: tags.operatorKeyword, color: '#708' },
  { tag: tags.logicOperator, color: '#708' },
  { tag: tags.comment, color: '#888', fontStyle: 'italic' },
  { tag: tags.invalid, color: 'red' },
]);

const theme = EditorView.theme({
  '&': { fontSize: '13px', maxHeight: '16em' },
  '&.cm-focused': { outline: 'none' },
  '.cm-scroller': { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace', lineHeight: '1.4' },
  '.cm-content': { padding: '8px 0' },
  '.cm-line': { padding: '0 10px' },
  '.cm-tooltip.cm-tooltip-autocomplete > ul': { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace', maxHeight: '16em' },
  '.cm-completionDetail': { color: '#68717d', fontStyle: 'normal', marginLeft: '1em' },
});

// Creates the editor in `parent`.
//   doc: the initial text; placeholder: shown while empty;
//   apiUrl: the URL strata's API is under, without a trailing slash (the page's own
//     directory, so a reverse-proxy prefix is kept);
//   onRun(): Enter (Shift+Enter adds a line; Enter with the completion list open picks);
//   onChange(text): after every change of the text.
// Answers { view, getValue(), setValue(text), focus() }.
export function createEditor({ parent, doc = '', placeholder = '', apiUrl, onRun, onChange }) {
  const promql = new PromQLExtension().setComplete({
    remote: {
      url: apiUrl,
      // Metric and label names of the last 12 hours, as Prometheus' UI asks.
      lookbackInterval: 12 * 60 * 60 * 1000,
      httpErrorHandler: (error) => console.warn('PromQL completion:', error),
    },
  });
  const run = () => {
    if (onRun) onRun();
    return true;
  };
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        history(),
        closeBrackets(),
        bracketMatching(),
        autocompletion(),
        syntaxHighlighting(highlight),
        EditorView.lineWrapping,
        placeholderText(placeholder),
        theme,
        promql.asExtension(),
        Prec.high(keymap.of([
          { key: 'Enter', run },
          { key: 'Shift-Enter', run: insertNewlineAndIndent },
        ])),
        keymap.of([...closeBracketsKeymap, ...standardKeymap, ...historyKeymap, ...lintKeymap]),
        EditorView.updateListener.of((update) => {
          if (update.docChanged && onChange) onChange(update.state.doc.toString());
        }),
        EditorView.contentAttributes.of({ 'aria-label': 'PromQL expression', spellcheck: 'false' }),
      ],
    }),
  });
  return {
    view,
    getValue: () => view.state.doc.toString(),
    setValue: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
    focus: () => view.focus(),
  };
}
