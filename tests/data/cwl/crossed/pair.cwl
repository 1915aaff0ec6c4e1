cwlVersion: v1.2
class: CommandLineTool
baseCommand: [printf, '%s-%s\n']
inputs:
  x: {type: string, inputBinding: {position: 1}}
  y: {type: string, inputBinding: {position: 2}}
stdout: pair.txt
outputs:
  out: {type: stdout}
