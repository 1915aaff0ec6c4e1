cwlVersion: v1.2
class: CommandLineTool
baseCommand: echo
inputs:
  word: {type: string, inputBinding: {position: 1}}
stdout: echoed.txt
outputs:
  out: {type: stdout}
