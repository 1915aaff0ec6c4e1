cwlVersion: v1.2
class: Workflow
doc: >
  Steps whose tools list exit codes: true whose 0 is a permanent failure, false whose 1 is
  a temporary one, false whose 1 is listed both as a success and as a permanent failure
  (cwltool looks at successCodes first), and a plain true.
inputs: {}
outputs: {}
steps:
  zero-fatal:
    run:
      class: CommandLineTool
      baseCommand: ['true', zero-fatal]
      permanentFailCodes: [0]
      inputs: {}
      outputs: {}
    in: {}
    out: []
  retry:
    run:
      class: CommandLineTool
      baseCommand: ['false', retry]
      temporaryFailCodes: [1]
      inputs: {}
      outputs: {}
    in: {}
    out: []
  listed-twice:
    run:
      class: CommandLineTool
      baseCommand: ['false', listed-twice]
      successCodes: [1]
      permanentFailCodes: [1]
      inputs: {}
      outputs: {}
    in: {}
    out: []
  plain:
    run:
      class: CommandLineTool
      baseCommand: ['true', plain]
      inputs: {}
      outputs: {}
    in: {}
    out: []
