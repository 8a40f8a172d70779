import { expect } from 'chai';
import { SafeText, decodeOrThrow } from '../../domain/codecs';
import { expectIssue } from '../support/validation';

// Found by the reliability fuzz (issue 7): free text (annotations, lifecycle reasons) let
// through URLs without a scheme and relative module paths, which R1.5 forbids. Prose that only
// resembles them (and/or, a version, a file name without a path) stays accepted. Since R10.2 no
// new record carries free text; this check still guards the legacy text a store may hold.

describe('R1.5 text never carries a URL or a module path, with or without a scheme or a ./', () => {
  const asText = (text: string) => decodeOrThrow(SafeText, 'text', text);

  it('R1.5 protocol-relative and www URLs, and module paths without ./, are refused with their path', () => {
    for (const text of [
      '//cdn.example.com/lib.js',
      'load //evil.example/x',
      'www.example.com',
      'see www.evil-site.org/collect',
      'node_modules/tool/dist/index.cjs',
      'require node_modules',
      'lib/x.wasm',
      'src\\tool\\run.ps1.exe',
      'plugins/handler.mjs',
    ]) {
      expectIssue(() => asText(text), '(root)', 'forbidden_value');
    }
  });

  it('R1.5 prose that only looks close stays accepted', () => {
    for (const text of ['read/write access, and/or approval', 'version 1.2.3 of the adapter', 'Node 20; ticket OPS-1234.', 'config.json reviewed', 'ratio 3/4 of the quota']) {
      expect(() => asText(text), text).not.to.throw();
    }
  });
});
