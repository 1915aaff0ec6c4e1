cwlVersion: v1.2
class: CommandLineTool
baseCommand: echo
inputs:
  word: {type: string, inputBinding: {position: 1}}
stdout: made.txt
outputs:
  out: {type: stdout}
