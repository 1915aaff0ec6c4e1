cwlVersion: v1.2
class: CommandLineTool
doc: grep run by sh -c (ShellCommandRequirement); its 1 for no match is a success.
requirements:
  ShellCommandRequirement: {}
baseCommand: [grep, -x, "7"]
successCodes: [0, 1]
inputs:
  f: {type: File, inputBinding: {position: 1}}
outputs: {}
