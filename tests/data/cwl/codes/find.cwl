cwlVersion: v1.2
class: CommandLineTool
doc: grep exits 1 when nothing matches, which this tool counts as success.
baseCommand: [grep, -x]
successCodes: [0, 1]
inputs:
  pattern:
    type: string
    inputBinding: {position: 1}
  f:
    type: File
    inputBinding: {position: 2}
stdout: found.txt
outputs:
  found: stdout
